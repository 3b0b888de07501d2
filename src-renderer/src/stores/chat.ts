// The Chat page's state (docs/design.md §Chat page): the two transcripts, the settings and the
// system prompt, the turn being written (fed by `chat.progress` events), and the list of saved
// chats (the back end saves each finished turn; opening one continues it). Kept in a store so
// leaving the page and coming back keeps the conversation; New chat ends it (the back end
// closes its models).
import { defineStore } from 'pinia';
import { CHAT_DEFAULTS, type ChatSide, type ChatSideState, type ChatState, type SavedChat, type SavedChatSummary } from '../../../src-shared/chat-api.js';
import type { TrainDevice } from '../../../src-shared/contract.js';
import { api, errorMessage } from '../api/client';
import { useAppStore } from './app';

/** A reply's figures, shown under it. */
export type ReplyStats = Pick<ChatSideState, 'tokens' | 'tokensPerSecond' | 'finishReason' | 'firstTokenMs'> & Partial<Pick<ChatSideState, 'context'>>;

export interface ChatLine {
  role: 'user' | 'assistant';
  content: string;
  /** A reply cut short by Stop. */
  stopped?: boolean;
  stats?: ReplyStats;
}

// A saved chat's replies keep no context (it is the model's, as loaded then).
const statsOf = (s: ReplyStats): ReplyStats => ({ tokens: s.tokens, tokensPerSecond: s.tokensPerSecond, finishReason: s.finishReason, firstTokenMs: s.firstTokenMs, ...(s.context ? { context: s.context } : {}) });

/** A saved chat's turns as the two transcripts (a side that failed has no reply in its column). */
function transcriptsOf(chat: SavedChat): Record<ChatSide, ChatLine[]> {
  const out: Record<ChatSide, ChatLine[]> = { base: [], adapter: [] };
  const sides: ChatSide[] = chat.adapterDir ? ['base', 'adapter'] : ['base'];
  for (const turn of chat.chatTurns) {
    for (const side of sides) {
      out[side].push({ role: 'user', content: turn.user });
      const reply = turn.replies[side];
      if (reply && reply.status !== 'failed' && reply.text) {
        out[side].push({ role: 'assistant', content: reply.text, ...(reply.status === 'stopped' ? { stopped: true } : {}), stats: statsOf(reply) });
      }
    }
  }
  return out;
}

/** The folder's last name: how a training run is named on this page. */
export function runName(dir: string): string {
  return dir.split(/[\\/]/).filter(Boolean).at(-1) ?? dir;
}

export const useChatStore = defineStore('chat', {
  state: () => ({
    modelDir: '',
    /** null: the base model alone. */
    adapterDir: null as string | null,
    device: 'cpu' as TrainDevice,
    temperature: CHAT_DEFAULTS.temperature as number,
    topP: CHAT_DEFAULTS.topP as number,
    maxTokens: CHAT_DEFAULTS.maxTokens as number,
    /** null: a random seed each turn (the same for both sides). */
    seed: null as number | null,
    /** Sent first to both sides, every turn ('' for none). */
    systemPrompt: '',
    chatId: null as string | null,
    /** The saved chats of the open database, newest first. */
    saved: [] as SavedChatSummary[],
    transcripts: { base: [] as ChatLine[], adapter: [] as ChatLine[] },
    /** The turn in progress or the last one, as the back end reports it. */
    live: null as ChatState | null,
    /** The turn this page started and has not yet moved into the transcripts. */
    pendingTurn: null as number | null,
    sending: false,
    listening: false,
  }),
  getters: {
    running: (state) => state.sending || state.live?.state === 'running',
    sides: (state): ChatSide[] => (state.adapterDir ? ['base', 'adapter'] : ['base']),
  },
  actions: {
    listen() {
      if (this.listening) return;
      this.listening = true;
      api.on('chat.progress', (s) => this.apply(s));
      void api.chatStatus().then((s) => this.apply(s), () => {});
      api.on('workspace.changed', ({ reason }) => {
        if (reason === 'database') void this.loadSaved();
      });
      void this.loadSaved();
    },
    async loadSaved() {
      try {
        this.saved = await api.chatList();
      } catch (err) {
        useAppStore().toast('error', errorMessage(err));
      }
    },
    /** Continues a saved chat: its model, adapter, settings, system prompt and transcripts. */
    async open(id: string) {
      if (this.running) return;
      try {
        const chat = await api.chatOpen({ id });
        await this.clear();
        Object.assign(this, {
          chatId: chat.id, modelDir: chat.modelDir, adapterDir: chat.adapterDir, systemPrompt: chat.systemPrompt,
          temperature: chat.sampling.temperature, topP: chat.sampling.topP, maxTokens: chat.sampling.maxTokens, seed: chat.sampling.seed,
          transcripts: transcriptsOf(chat),
        });
      } catch (err) {
        useAppStore().toast('error', errorMessage(err));
      }
    },
    async remove(id: string) {
      try {
        await api.chatDelete({ id });
        if (this.chatId === id) await this.clear();
        await this.loadSaved();
      } catch (err) {
        useAppStore().toast('error', errorMessage(err));
      }
    },
    /** Takes a state unless it is older than the one shown (events and answers may cross). */
    apply(state: ChatState) {
      const shown = this.live;
      if (shown && (state.turn < shown.turn || (state.turn === shown.turn && shown.state !== 'running' && state.state === 'running'))) return;
      this.live = state;
      if (state.turn === this.pendingTurn && state.state !== 'running') this.finishTurn(state);
    },
    /** The replies join their transcripts; a side that failed says why in a toast. */
    finishTurn(state: ChatState) {
      this.pendingTurn = null;
      const app = useAppStore();
      for (const side of state.sides) {
        if (side.status === 'failed') app.toast('error', `${side.side === 'base' ? 'Base' : `Adapter ${side.name}`}: ${side.error}`);
        else if (side.text) this.transcripts[side.side].push({ role: 'assistant', content: side.text, ...(side.status === 'stopped' ? { stopped: true } : {}), stats: statsOf(side) });
      }
      if (state.saveError) app.toast('error', state.saveError);
      void this.loadSaved();
    },
    async send(text: string): Promise<boolean> {
      if (this.running || !text.trim()) return false;
      const sides = this.sides;
      const message = { role: 'user' as const, content: text };
      const system = this.systemPrompt.trim() ? [{ role: 'system' as const, content: this.systemPrompt }] : [];
      const history = (side: ChatSide) => [...system, ...this.transcripts[side].map(({ role, content }) => ({ role, content })), message];
      this.sending = true;
      try {
        const state = await api.chatStart({
          ...(this.chatId ? { chatId: this.chatId } : {}),
          modelDir: this.modelDir,
          adapterDir: this.adapterDir,
          device: this.device,
          base: history('base'),
          ...(sides.includes('adapter') ? { adapter: history('adapter') } : {}),
          sampling: { temperature: this.temperature, topP: this.topP, maxTokens: this.maxTokens, ...(this.seed === null ? {} : { seed: this.seed }) },
        });
        for (const side of sides) this.transcripts[side].push(message);
        this.chatId = state.chatId;
        this.pendingTurn = state.turn;
        this.apply(state);
        // Its end may have come as an event before this answer did.
        if (this.live?.turn === state.turn && this.live.state !== 'running') this.finishTurn(this.live);
        return true;
      } catch (err) {
        useAppStore().toast('error', errorMessage(err));
        return false;
      } finally {
        this.sending = false;
      }
    },
    async stop() {
      try {
        this.apply(await api.chatStop());
      } catch (err) {
        useAppStore().toast('error', errorMessage(err));
      }
    },
    /** Ends the chat: the back end stops and closes its models; the transcripts start empty. */
    async clear() {
      this.transcripts = { base: [], adapter: [] };
      this.chatId = null;
      this.pendingTurn = null;
      try {
        this.apply(await api.chatEnd());
      } catch (err) {
        useAppStore().toast('error', errorMessage(err));
      }
    },
  },
});

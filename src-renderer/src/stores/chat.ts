// The Chat page's state (docs/design.md §Chat page): the two transcripts, the settings, and the
// turn being written, fed by `chat.progress` events. Kept in a store so leaving the page and
// coming back keeps the conversation; Clear ends it (the back end closes its models).
import { defineStore } from 'pinia';
import { CHAT_DEFAULTS, type ChatSide, type ChatState } from '../../../src-shared/chat-api.js';
import type { TrainDevice } from '../../../src-shared/contract.js';
import { api, errorMessage } from '../api/client';
import { useAppStore } from './app';

export interface ChatLine {
  role: 'user' | 'assistant';
  content: string;
  /** A reply cut short by Stop. */
  stopped?: boolean;
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
    chatId: null as string | null,
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
        else if (side.text) this.transcripts[side.side].push({ role: 'assistant', content: side.text, ...(side.status === 'stopped' ? { stopped: true } : {}) });
      }
    },
    async send(text: string): Promise<boolean> {
      if (this.running || !text.trim()) return false;
      const sides = this.sides;
      const message = { role: 'user' as const, content: text };
      const history = (side: ChatSide) => [...this.transcripts[side].map(({ role, content }) => ({ role, content })), message];
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

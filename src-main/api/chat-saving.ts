// A finished Chat page turn as a saved chat keeps it (src-main/store/saved-chats.ts): the user's
// message and each side's reply with its figures, added to the chat's earlier turns; the title is
// the first user message, the settings and system prompt those of the latest turn.
import type { CallInput } from '../../src-shared/contract.js';
import type { ChatState, SavedChat, SavedChatTurn } from '../../src-shared/chat-api.js';
import path from 'node:path';

const TITLE_CHARS = 80;

/** The turn that just ended, from its input (the user's message ends each side's messages) and the final state. */
export function savedTurn(input: CallInput<'chatStart'>, state: ChatState): SavedChatTurn {
  const replies: SavedChatTurn['replies'] = {};
  for (const side of state.sides) {
    const { text, reasoning, status, tokens, finishReason, tokensPerSecond, firstTokenMs, error } = side;
    replies[side.side] = { text, reasoning, status, tokens, finishReason, tokensPerSecond, firstTokenMs, error };
  }
  return { user: input.base.at(-1)!.content, at: Date.now(), replies };
}

/** The system prompt the turn was sent with ('' when none): the first message of the base side's. */
export function systemPromptOf(input: CallInput<'chatStart'>): string {
  return input.base[0]?.role === 'system' ? input.base[0].content : '';
}

function titleOf(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > TITLE_CHARS ? `${line.slice(0, TITLE_CHARS - 1)}…` : line || 'Untitled chat';
}

/** The chat with `turn` added (a new chat when `existing` is null). */
export function withTurn(
  existing: SavedChat | null,
  state: ChatState,
  turn: SavedChatTurn,
  at: { modelDir: string; adapterDir: string | null; sampling: CallInput<'chatStart'>['sampling']; systemPrompt: string },
): SavedChat {
  const chatTurns = [...(existing?.chatTurns ?? []), turn];
  return {
    id: state.chatId!,
    title: existing?.title ?? titleOf(turn.user),
    createdAt: existing?.createdAt ?? turn.at,
    updatedAt: turn.at,
    turns: chatTurns.length,
    adapter: at.adapterDir ? path.basename(at.adapterDir) : null,
    modelDir: at.modelDir,
    adapterDir: at.adapterDir,
    systemPrompt: at.systemPrompt,
    sampling: { temperature: at.sampling.temperature, topP: at.sampling.topP, maxTokens: at.sampling.maxTokens, seed: at.sampling.seed ?? null },
    chatTurns,
  };
}

/**
 * The Chat page's calls (docs/design.md §Chat page): one turn of a conversation sent to the
 * base model and to a fine-tuned adapter at once, each with its own transcript (and the same
 * system prompt), streamed as `chat.progress` events; Stop; ending the chat, which frees the
 * loaded models; and the saved chats: every finished turn is saved in the database, so chats are
 * listed, reopened and deleted, and survive a restart. Node-free (the contract and the renderer
 * import it); the contract spreads CHAT_CALLS into its calls.
 */
import type { CallSpec, Returns } from './call-spec.js';
import { TRAIN_DEVICES } from './training.js';
import { array, integer, nullable, number, object, oneOf, optional, string } from './validate.js';

export type ChatSide = 'base' | 'adapter';
export const CHAT_ROLES = ['system', 'user', 'assistant'] as const;

/** What the page starts with; the same seed goes to both sides, so they differ only by their weights. */
export const CHAT_DEFAULTS = { temperature: 0.8, topP: 0.95, maxTokens: 200 } as const;
export const CHAT_MAX_TOKENS = 8192;

const folder = string({ min: 1, max: 4096 });
const chatId = string({ min: 1, max: 100 });
const chatMessage = object({ role: oneOf(CHAT_ROLES), content: string({ max: 200_000 }) });
/** One side's messages so far, ending with the user's new message. */
const transcript = array(chatMessage, { min: 1, max: 2000 });

export const chatSampling = object({
  temperature: number({ min: 0, max: 2 }),
  topP: number({ min: 0.01, max: 1 }),
  maxTokens: integer({ min: 1, max: CHAT_MAX_TOKENS }),
  /** Left out: one random seed, still the same for both sides. */
  seed: optional(integer({ min: 0, max: 2 ** 32 - 1 })),
});

export const chatStartInput = object({
  /** The conversation this turn continues; left out, a new one starts (the answer names it). */
  chatId: optional(chatId),
  modelDir: folder,
  /** The adapter's side is left out when null. */
  adapterDir: nullable(folder),
  device: optional(oneOf(TRAIN_DEVICES)),
  base: transcript,
  /** Required with an adapter: the adapter's own transcript (its own earlier replies). */
  adapter: optional(transcript),
  sampling: chatSampling,
});

export type ChatSideStatus = 'loading' | 'generating' | 'done' | 'stopped' | 'failed';

export interface ChatSideState {
  side: ChatSide;
  /** 'base', or the adapter folder's name. */
  name: string;
  /** The reply so far; once the side is done, exactly the reply. */
  text: string;
  /** Reasoning a thinking model wrote before its answer ('' when none). */
  reasoning: string;
  status: ChatSideStatus;
  /** Generated tokens, once the side has finished. */
  tokens: number | null;
  /** Why generation ended: 'stop' (the model ended its reply, or a stop string), 'length' (Max tokens), 'tool_calls'; null while writing or after Stop. */
  finishReason: ChatFinishReason | null;
  /** Generated tokens per second, from the first token to the last (the prompt's processing not counted); null under 2 tokens. */
  tokensPerSecond: number | null;
  /** Milliseconds from the model being ready to the first token (the prompt's processing). */
  firstTokenMs: number | null;
  error: string | null;
  /**
   * While the side's model loads for the first time in its form: how far the conversion of its
   * weights is, 0 to 1 (minutes for a 7–8B model; kept for later loads); null otherwise.
   */
  converting: number | null;
  /**
   * Once the side has finished: the chat's tokens with this reply (its prompt and the reply) and
   * the most its model answers within here (LocalModel.maxPositions: the positions, or fewer where
   * the memory holds less), so the page can say how close the chat is to where it must be cleared.
   */
  context: { used: number; limit: number } | null;
}

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls';

/** One side's reply as a saved chat keeps it. */
export type SavedChatReply = Pick<ChatSideState, 'text' | 'reasoning' | 'status' | 'tokens' | 'finishReason' | 'tokensPerSecond' | 'firstTokenMs' | 'error'>;

/** A finished turn: the user's message and each side's reply. */
export interface SavedChatTurn {
  user: string;
  at: number;
  replies: Partial<Record<ChatSide, SavedChatReply>>;
}

export interface SavedChatSummary {
  id: string;
  /** The first user message, cut to a line. */
  title: string;
  createdAt: number;
  updatedAt: number;
  turns: number;
  /** The adapter's folder name, or null for the base model alone. */
  adapter: string | null;
}

export interface SavedChat extends SavedChatSummary {
  modelDir: string;
  adapterDir: string | null;
  /** The system prompt of its last turn ('' when none). */
  systemPrompt: string;
  sampling: { temperature: number; topP: number; maxTokens: number; seed: number | null };
  chatTurns: SavedChatTurn[];
}

/** The turn in progress or the last one. */
export interface ChatState {
  chatId: string | null;
  /** Counts the turns of this launch, so the page can tell a new turn's events from an old one's. */
  turn: number;
  state: 'idle' | 'running' | 'done' | 'stopped';
  sides: ChatSideState[];
  /** Whether live capture recorded this turn (each side as its own captured session). */
  captured: boolean;
  /** The seed both sides sampled with. */
  seed: number | null;
  /** Why the finished turn could not be saved with the chat, or null. */
  saveError: string | null;
  /** Why both sides answer with int8 or int4 weights (fp32 did not fit the memory available), or null: fp32. */
  weightsNote: string | null;
  /** Where the memory available holds a shorter chat than the model's positions: how long a chat fits, and why; else null. */
  contextNote: string | null;
}

const returns = <O>() => ({}) as Returns<O>;

export const CHAT_CALLS = {
  chatStart: {
    doc: 'Sends the next user message to the base model and the adapter at once; their replies stream as chat.progress (docs/design.md §Chat page).',
    input: chatStartInput,
    output: returns<ChatState>(),
  },
  chatStatus: { doc: 'The Chat page turn in progress, or the last one.', input: object({}), output: returns<ChatState>() },
  chatStop: { doc: 'Stops both replies after the token each is on; what was written stays.', input: object({}), output: returns<ChatState>() },
  chatEnd: { doc: 'Ends the chat: stops a reply in progress and closes the models the chat loaded.', input: object({}), output: returns<ChatState>() },
  chatList: { doc: 'The saved chats of this database, newest first.', input: object({}), output: returns<SavedChatSummary[]>() },
  chatOpen: { doc: 'One saved chat with its turns, to continue it.', input: object({ id: chatId }), output: returns<SavedChat>() },
  chatDelete: { doc: 'Deletes a saved chat; `deleted`: whether there was one.', input: object({ id: chatId }), output: returns<{ deleted: boolean }>() },
} satisfies Record<string, CallSpec<unknown, unknown>>;

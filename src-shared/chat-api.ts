/**
 * The Chat page's calls (docs/design.md §Chat page): one turn of a conversation sent to the
 * base model and to a fine-tuned adapter at once, each with its own transcript, streamed as
 * `chat.progress` events; Stop; and ending the chat, which frees the loaded models. Node-free
 * (the contract and the renderer import it); the contract spreads CHAT_CALLS into its calls.
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
  chatId: optional(string({ min: 1, max: 100 })),
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
  error: string | null;
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
} satisfies Record<string, CallSpec<unknown, unknown>>;

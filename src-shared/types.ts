// The shared data model (docs/design.md §Data model). Importers produce `ImportedConversation`s; the store
// persists them as sessions and turns; the pipeline derives samples; labels sit on samples.
// Every layer speaks these types, so a change here is a change to the whole app.

import type { CompositeScore } from './composite.js';

export type Role = 'system' | 'user' | 'assistant' | 'tool';

/**
 * Every import format, one record each (docs/how-to-add.md, "An import format"): its name in the
 * Import panel's menu, and what it reads, for the one line every "unknown file" error ends with
 * (`SUPPORTED_LINE`). The format names, `SOURCE_FORMATS` and the CLI's `--format` come from here.
 */
export const SOURCE_FORMAT_INFO = {
  chatgpt: { label: 'ChatGPT', reads: 'ChatGPT conversations.json, split files or the export zip' },
  claude: { label: 'Claude', reads: 'Claude conversations.json or zip' },
  sharegpt: { label: 'ShareGPT', reads: 'ShareGPT {conversations:[{from,value}]}' },
  openai: { label: 'OpenAI chat JSONL', reads: 'OpenAI chat JSONL {messages:[…]} per line' },
  messages: { label: 'Hugging Face messages', reads: 'Hugging Face {messages:[…]} JSON or JSONL' },
  openwebui: { label: 'Open WebUI', reads: 'Open WebUI chat export' },
} as const satisfies Record<string, { label: string; reads: string }>;
export type SourceFormat = keyof typeof SOURCE_FORMAT_INFO;
export const SOURCE_FORMATS: readonly SourceFormat[] = Object.keys(SOURCE_FORMAT_INFO) as SourceFormat[];
/** Where a session came from: an imported format, or `capture` (live capture, src-main/capture/). */
export type SessionFormat = SourceFormat | 'capture';
export const SESSION_FORMATS: readonly SessionFormat[] = [...SOURCE_FORMATS, 'capture'];

/** An OpenAI-style tool call made by an assistant turn. `arguments` is the raw JSON text. */
export interface ToolCall {
  id?: string;
  name: string;
  arguments: string;
}

/** A non-text part of a turn (image, file, audio …) replaced in the text by a placeholder. */
export interface Attachment {
  kind: string; // 'image' | 'file' | 'audio' | …
  name?: string;
  mimeType?: string;
  /** Metadata kept from the export (asset pointer, size, …); never the bytes. */
  meta?: Record<string, unknown>;
}

export interface Citation {
  marker: string;
  url?: string;
  title?: string;
}

/** One normalised turn as an importer emits it, before classification. */
export interface ImportedTurn {
  role: Role;
  /** The text used for training: cleaned (citation markers stripped), reasoning excluded. */
  text: string;
  /** Reasoning / thinking, kept apart from the reply text. */
  reasoning?: string;
  toolCalls?: ToolCall[];
  /** For tool turns: which call this answers, and the tool's name where known. */
  toolCallId?: string;
  toolName?: string;
  attachments?: Attachment[];
  citations?: Citation[];
  timestamp?: number; // unix seconds
  /** Hidden context (custom instructions, visually hidden messages kept for the record). */
  hidden?: boolean;
  /** The export's own id for this message, where it has one. */
  externalId?: string;
  /**
   * How the message ended where that was not a normal finish, as the export says it
   * (ChatGPT: 'in_progress' = interrupted by the user; Claude tool results: 'error').
   */
  status?: string;
}

/**
 * A regenerated or otherwise abandoned assistant reply that sits beside the kept one
 * (ChatGPT siblings off the active branch). `atTurn` is the index in `turns` of the kept
 * assistant reply it competes with: together they form a preference pair.
 */
export interface BranchAlternative {
  atTurn: number;
  turn: ImportedTurn;
}

export interface ImportedConversation {
  /** The export's own conversation id, or undefined to fall back to a content hash. */
  externalId?: string;
  title?: string;
  createdAt?: number; // unix seconds
  turns: ImportedTurn[];
  alternatives: BranchAlternative[];
  /** Original metadata worth keeping (model slug, update time …), stored as JSON. */
  metadata: Record<string, unknown>;
  /** Per-conversation warnings (unknown content types …), prefixed with the conversation. */
  warnings: string[];
}

export type TurnClass = 'main' | 'side';

export type LabelSource = 'manual' | 'heuristic' | `judge:${string}`;
export type Reward = 1 | -1 | 0;

export interface Vote {
  reward?: Reward;
  /** A composite judge's vote: its overall 0–100 score (its reward is that score mapped). */
  score?: number;
  hint?: string;
  raw: string;
  /**
   * LLM judges with hints: the hint judge's vote cast beside this reward vote (vote i of
   * each judge share one entry, so `votes` stays one reward per vote). `hintAnswer` is its
   * \boxed{} answer (undefined when unparseable), `hintRaw` its raw output, and `hint` its
   * tagged hint.
   */
  hintAnswer?: 1 | -1;
  hintRaw?: string;
}

/** Thrown for a user error: the CLI prints the message on one line and exits 1. */
export class UserError extends Error {
  override name = 'UserError';
}

/**
 * A user error said twice (docs/design.md §Surfaces): its message is the command line's, which
 * names flags; `forApp()` is the app's, which names the fields of its pages instead.
 */
export class SurfaceError extends UserError {
  constructor(
    cliMessage: string,
    private readonly appMessage: string,
  ) {
    super(cliMessage);
  }

  forApp(): string {
    return this.appMessage;
  }
}

/** What a page of the app shows for an error: the app's wording where it has one. */
export function appWording(err: unknown): string {
  if (err instanceof SurfaceError) return err.forApp();
  return err instanceof Error ? err.message : String(err);
}

// Turns as chat messages in the OpenAI / Hugging Face shape (built in
// src-main/pipeline/chat-messages.ts): what chat templates, TRL and the trainer expect.
export interface ChatToolCall {
  id?: string;
  type: 'function';
  function: { name: string; arguments: string };
}

// A type alias (not an interface) so it is assignable to `{ [key: string]: unknown }`
// message shapes such as the tokenizer's.
export type ChatMessage = {
  role: Role;
  content: string;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  name?: string;
};

/** What a judge sees of one sample (docs/design.md §Judges). */
export interface JudgeInput {
  sessionId: string;
  responseTurn: number;
  /** The (windowed) context before the reply, as chat messages. */
  context: ChatMessage[];
  /** The reply being judged, and its tool calls if any. */
  response: string;
  responseMessage: ChatMessage;
  nextState: { role: 'user' | 'tool'; text: string };
}

/** A judge's decision for one sample: the reward, an optional hint, and the raw votes. */
export interface JudgeVerdict {
  reward: Reward;
  hint: string | null;
  votes: Vote[];
  /**
   * How sure the judge is of the reward, 0–1 (docs/design.md §Judges): the heuristic's cue
   * strength and agreement; an LLM judge's vote agreement (the share of votes for the reward).
   */
  confidence?: number;
  /** Why: the heuristic's matched cues, or an LLM judge's vote count. */
  evidence?: string[];
  /** The composite judge's score and reasons (docs/design.md §Composite score). */
  composite?: CompositeScore;
}

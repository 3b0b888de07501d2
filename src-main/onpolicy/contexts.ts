/**
 * The contexts an on-policy run generates from (docs/design.md §On-policy training): the lines
 * of a task file, or the database's training samples. A run keeps them in its folder as
 * `contexts.jsonl`, one per line, and a resume reads them from there (checked against the
 * checkpoint's sha256), so what a step samples never depends on a database or file that
 * changed since.
 *
 *     {"id":"tasks.jsonl:3","task":{"messages":[…],"answer":"391"}}
 *     {"id":"s1/4","sample":{"sessionId":"s1","responseTurn":4,"messages":[…],"original":"…",
 *       "hint":"…","reaction":{"role":"user","text":"…"},"label":-1,"captured":{…}}}
 *
 * A database context offers the tools its session offered (docs/design.md §Tools offered), shown
 * and never run: the rollout answers the user's chat as it was, and a reply that calls one of
 * them ends there, its calls its answer for the replay judge. A sample captured live from the
 * model being trained keeps its rollout (`captured`), whose tokens train with the user's label
 * beside the new rollouts (./scoring.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { OfferedTool } from '../../src-shared/offered-tools.js';
import { messageCalls, replyWithCalls } from '../../src-shared/reply-text.js';
import { UserError, type ChatMessage } from '../../src-shared/types.js';
import { methodRecord } from '../../src-shared/training-methods.js';
import { readJsonLines } from '../store/jsonl-file.js';
import type { TrainingSample } from '../../src-shared/views.js';
import type { ReplayJudgeInput } from '../judge/prompts.js';
import { seededRandom } from '../model/sampling.js';
import type { ChatTokenizer } from '../model/tokenizer.js';
import { enhancedContext } from '../pipeline/hint-context.js';
import { templateView, type PromptMessage, type RolloutContext } from '../rollout/manager.js';
import { parseTask, readTasks, taskContext } from '../rollout/tasks.js';
import type { ToolRegistry } from '../rollout/tools.js';
import { epochOrder, rolloutSpan } from '../train/batches.js';
import type { TrainMethod } from '../train/training-step.js';

export const CONTEXTS_FILE = 'contexts.jsonl';

/** A database sample as an on-policy context. */
export interface SampleContext {
  sessionId: string;
  responseTurn: number;
  messages: PromptMessage[];
  /** The tools the session offered (shown to the model, not run). */
  tools?: OfferedTool[];
  /** The reply the user reacted to, a line for each tool call it made after its text (src-shared/reply-text.ts). */
  original: string;
  hint: string | null;
  reaction: { role: 'user' | 'tool'; text: string } | null;
  /** The sample's label (0: none, or neutral). */
  label: number;
  /**
   * The reply as the model being trained generated it live, when the sample was captured from
   * it and labelled ±1: without a label the reply has no reward to train with, and a 0 would
   * count as one (GRPO would take it for a real 0 in its group).
   */
  captured?: { promptIds: number[]; tokens: number[]; logprobs: number[] };
}

export type ContextLine = { id: string; task: unknown } | { id: string; sample: SampleContext };

/** A context ready for a step: what the rollout manager generates from, and what scores it. */
export interface StepContext {
  id: string;
  rollout: RolloutContext;
  /** The session of a database sample (never a held-out one). */
  sessionId?: string;
  /** OPD's hint; the teacher is the base model with it in the prompt. */
  hint: string | null;
  /** The replay judge's view of a database sample, less the new reply. */
  judgeInput?: Omit<ReplayJudgeInput, 'reply'>;
  captured?: SampleContext['captured'];
  label: number;
}

/** The task file's lines, each as the file has it (readTasks checks every one first). */
export function taskContextLines(file: string): ContextLine[] {
  const tasks = readTasks(file);
  const raw = new Map<string, unknown>();
  const name = path.basename(file);
  fs.readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
    if (line.trim()) raw.set(`${name}:${i + 1}`, JSON.parse(line));
  });
  return tasks.map((t) => ({ id: t.id, task: raw.get(t.id) }));
}

const asPrompt = (m: TrainingSample['messages'][number]): PromptMessage => {
  if (m.role === 'tool') return { role: 'tool', name: m.name ?? 'tool', content: m.content, ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}) };
  if (m.role === 'assistant') return { role: 'assistant', content: m.content, ...(m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}) };
  return { role: m.role, content: m.content };
};

/** A label the captured reply can train with as its reward: +1 or −1 (0 is "no label"). */
export function isTrainingLabel(label: number): boolean {
  return label === 1 || label === -1;
}

/** Why a sample gives an on-policy run of `method` no signal, or null when it gives some. */
function noSignal(s: TrainingSample, method: TrainMethod, judged: boolean, captured: boolean): string | null {
  const { uses } = methodRecord(method);
  if ((uses.hint && s.hint !== null) || (uses.reward && (captured || judged))) return null;
  return uses.reward ? 'no hint, no judge and no captured reply with a label' : 'no hint';
}

/**
 * The database's samples as contexts, with the reason and count of those left out. A sample
 * keeps its captured rollout only when it has a ±1 label and its context renders to the
 * rollout's prompt ids (../train/batches.ts rolloutSpan).
 */
export function sampleContextLines(
  samples: readonly TrainingSample[], method: TrainMethod, judged: boolean, tokenizer: ChatTokenizer, maxLength: number,
): { lines: ContextLine[]; skipped: Record<string, number> } {
  const lines: ContextLine[] = [];
  const skipped: Record<string, number> = {};
  for (const s of samples) {
    const rollout = isTrainingLabel(s.reward) ? rolloutSpan(s, tokenizer, s.messages.map((m) => ({ ...m })), maxLength) : null;
    const why = noSignal(s, method, judged, rollout !== null);
    if (why) {
      skipped[why] = (skipped[why] ?? 0) + 1;
      continue;
    }
    const sample: SampleContext = {
      sessionId: s.sessionId, responseTurn: s.responseTurn, messages: s.messages.map(asPrompt), ...(s.tools ? { tools: s.tools } : {}),
      original: replyWithCalls(s.response.content, messageCalls(s.response)),
      hint: s.hint, reaction: s.reaction ?? null, label: s.reward,
      ...(rollout && s.rollout ? { captured: s.rollout } : {}),
    };
    lines.push({ id: `${s.sessionId}/${s.responseTurn}`, sample });
  }
  return { lines, skipped };
}

/** A context message as the replay judge reads it (its tool calls shown after its text). */
function judgeMessage(m: PromptMessage): ChatMessage {
  return { role: m.role, content: m.content, ...('tool_calls' in m && m.tool_calls ? { tool_calls: m.tool_calls } : {}) };
}

export function contextsText(lines: readonly ContextLine[]): string {
  return lines.map((l) => JSON.stringify(l) + '\n').join('');
}

/** Reads a run's contexts.jsonl back. */
export function readContextLines(file: string): ContextLine[] {
  if (!fs.existsSync(file)) throw new UserError(`${path.dirname(file)}: missing ${CONTEXTS_FILE}, which the run generates from`);
  return readJsonLines(file).lines.map(({ value, where }) => {
    const obj = value as Record<string, unknown> | null;
    if (typeof obj?.id !== 'string' || (obj.task === undefined) === (obj.sample === undefined)) throw new UserError(`${where}: not a context line (an id with a task or a sample)`);
    return obj as unknown as ContextLine;
  });
}

/** The contexts as a step uses them; a task naming a tool that is not available is a one-line error. */
export function stepContexts(lines: readonly ContextLine[], registry: ToolRegistry, file: string): StepContext[] {
  return lines.map((line, i) => {
    if ('task' in line) {
      const rollout = taskContext(parseTask(line.task, line.id, `${file}:${i + 1}`), registry);
      return { id: line.id, rollout, hint: null, label: 0 };
    }
    const s = line.sample;
    return {
      id: line.id, rollout: { id: line.id, messages: s.messages, tools: s.tools ?? [], ...(s.tools ? { recordedTools: true } : {}) },
      sessionId: s.sessionId, hint: s.hint, label: s.label,
      judgeInput: { context: s.messages.map(judgeMessage), original: s.original, reaction: s.reaction, hint: s.hint },
      ...(s.captured ? { captured: s.captured } : {}),
    };
  });
}

/**
 * The contexts of step `step`: epochs over all contexts, each in an order shuffled from (seed,
 * epoch), `perStep` at a time (the last batch of an epoch may be smaller), so every context
 * comes up equally often and none twice in a step. A pure function of its arguments, so a
 * resumed run samples what the straight run did.
 */
export function contextsForStep<T>(contexts: readonly T[], perStep: number, seed: number, step: number): { contexts: T[]; epoch: number } {
  const size = Math.min(perStep, contexts.length);
  const perEpoch = Math.ceil(contexts.length / size);
  const epoch = Math.floor(step / perEpoch);
  const j = step % perEpoch;
  const order = epochOrder(contexts.length, seed, epoch, seededRandom);
  return { contexts: order.slice(j * size, (j + 1) * size).map((i) => contexts[i]!), epoch };
}

/** The first rollout seed of step `step`: the manager gives sample k of context c seed base + c·K + k. */
export function stepSeedBase(seed: number, step: number): number {
  let h = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(step + 1, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0;
  return (h ^ (h >>> 12)) >>> 0;
}

/**
 * The teacher's prompt ids for a hinted context (docs/design.md §Hint prompt): the context
 * with the hint on its last user message, rendered as the manager renders the student's
 * prompt (with the tools its session offered), generation prompt included.
 */
export function teacherPromptIds(tokenizer: ChatTokenizer, context: StepContext): number[] {
  const messages = templateView(enhancedContext(context.rollout.messages, context.hint!));
  const tools = context.rollout.tools?.length ? context.rollout.tools : undefined;
  return tokenizer.encode(tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, tools }));
}

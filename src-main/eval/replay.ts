/**
 * Replay (docs/design.md §Evaluation): for each held-out context, K replies from the base and
 * from each adapter, with the same seeds and sampling settings, then a replay judge labels each
 * (../judge/replay-judge.ts). Generation runs one model at a time (an adapter is loaded merged,
 * ../train/adapted-model.ts), the K replies of a context sharing one prefill; the judge is
 * opened after the last model is closed, so a local judge never shares memory with a generator.
 *
 * Stopping keeps what was done: replies generated so far are judged only if the judge was
 * already running; the caller reports what came back.
 */
import type { ReplayContext, ReplayReply } from '../../src-shared/eval-replay.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { withLessons } from '../../src-shared/lessons.js';
import { messageCalls, replyWithCalls } from '../../src-shared/reply-text.js';
import { openCompleter, type LlmJudgeSpec } from '../judge/backends.js';
import { judgeReplay } from '../judge/replay-judge.js';
import { keepPromptTail } from '../model/context-limit.js';
import type { Device } from '../model/ort-session.js';
import { loadAdaptedModel } from '../train/adapted-model.js';
import { fitInference } from '../model/inference-fit.js';
import { deviceGpuMemory } from '../model/gpu-memory.js';
import type { CheckedForm } from '../model/local-model.js';
import { defaultPrecision } from '../../src-shared/training.js';
import type { GeneratedReply } from './generation-stats.js';

/** Replay's settings: plain data, so they cross into the evaluation worker. */
export interface ReplaySettings {
  /** Replies per context (K). */
  rollouts: number;
  temperature: number;
  maxNewTokens: number;
  /** The replay judge; null: replies are generated (for statistics) but not judged. */
  judge: LlmJudgeSpec | null;
  /** Votes per reply (m). */
  votes: number;
  /** At most this many held-out contexts are replayed, the first in the split's order (a bounded run on a slow judge); all when absent. */
  contexts?: number;
}

export const REPLAY_DEFAULTS: Omit<ReplaySettings, 'judge'> = { rollouts: 2, temperature: 0.7, maxNewTokens: 128, votes: 3 };
/** Contexts generated together (each with K sequences). */
const CONTEXTS_PER_BATCH = 4;

export interface ReplayModel {
  name: string;
  adapterDir: string | null;
  /** Lessons the model is told as its system prompt (docs/design.md §Lessons); the judge still sees the context as it was. */
  system?: string;
}

export interface Replayed {
  /** Per model: each context's replies (judged or not yet: reward 0, no votes). */
  replies: Map<string, Record<string, ReplayReply[]>>;
  /** Per model: the generated replies' shape, for the statistics. */
  generated: Map<string, GeneratedReply[]>;
  judged: boolean;
  stopped: boolean;
  /** Why the models generated with int8 or int4 weights (fp32 did not fit), or null. */
  weightsNote: string | null;
}

export interface ReplayRun {
  modelDir: string;
  device: Device;
  seed: number;
  settings: ReplaySettings;
  onProgress?: (model: string, done: number, total: number, message: string) => void;
  shouldStop?: () => boolean;
}

export const sampleKey = (s: Pick<TrainingSample, 'sessionId' | 'responseTurn'>) => `${s.sessionId}/${s.responseTurn}`;

export function replayContexts(samples: readonly TrainingSample[]): ReplayContext[] {
  return samples.map((s) => ({
    key: sampleKey(s),
    context: s.messages.map((m) => ({ ...m })),
    ...(s.tools ? { tools: s.tools } : {}),
    original: replyWithCalls(s.response.content, messageCalls(s.response)),
    reaction: s.reaction ?? null,
    hint: s.hint,
    label: s.reward,
  }));
}

/** The contexts replay covers: every sample's, or the first `settings.contexts` of them. */
export function boundedContexts(samples: readonly TrainingSample[], settings: Pick<ReplaySettings, 'contexts'>): ReplayContext[] {
  const all = replayContexts(samples);
  return settings.contexts === undefined ? all : all.slice(0, settings.contexts);
}

/** FNV-1a of (seed, context, k): reply k of a context gets the same seed under every model. */
export function replySeed(seed: number, key: string, k: number): number {
  let h = 0x811c9dc5;
  for (const ch of `${seed}\u0000${key}\u0000${k}`) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) & 0x7fffffff;
}

const breathe = () => new Promise<void>((resolve) => setImmediate(resolve));

export async function replay(contexts: readonly ReplayContext[], models: readonly ReplayModel[], run: ReplayRun): Promise<Replayed> {
  // One form of the weights for every model compared, chosen before the first loads (they load one at a time).
  const fit = fitInference(run.modelDir, { quantize: 'auto', precision: defaultPrecision(run.device), gpu: await deviceGpuMemory(run.device), device: run.device });
  const { quantize, note } = fit;
  const form: CheckedForm = { quantize, context: fit.context };
  if (note) run.onProgress?.(models[0]?.name ?? 'base', 0, contexts.length, `replay: ${note}`);
  const out: Replayed = { replies: new Map(), generated: new Map(), judged: false, stopped: false, weightsNote: note };
  for (const m of models) {
    if (out.stopped) break;
    out.stopped = await generateFor(m, contexts, { ...run, form }, out);
  }
  if (run.settings.judge && !out.stopped) out.stopped = await judgeAll(contexts, models, run, out);
  return out;
}

/** Generates every context's K replies under one model; true when stopped. */
async function generateFor(m: ReplayModel, contexts: readonly ReplayContext[], run: ReplayRun & { form: CheckedForm }, out: Replayed): Promise<boolean> {
  const { rollouts, temperature, maxNewTokens } = run.settings;
  const replies: Record<string, ReplayReply[]> = {};
  const generated: GeneratedReply[] = [];
  out.replies.set(m.name, replies);
  out.generated.set(m.name, generated);
  const model = await loadAdaptedModel(run.modelDir, m.adapterDir, { device: run.device, ...run.form, ignoreMemory: true, prepare: ['generate'] });
  try {
    for (let i = 0; i < contexts.length; i += CONTEXTS_PER_BATCH) {
      await breathe();
      if (run.shouldStop?.()) return true;
      const part = contexts.slice(i, i + CONTEXTS_PER_BATCH);
      const prompts = part.map((c) => {
        // Offered the conversation's tools, as the original reply was; the context's start is
        // cut when it would leave no room for the reply.
        const template = c.tools ? { tools: c.tools } : undefined;
        const ids = model.promptIds(m.system ? withLessons(c.context, m.system) : c.context, { template });
        return { prompt: keepPromptTail(ids, model.maxPositions, maxNewTokens, model.tokenizer.bosTokenId).ids, seeds: Array.from({ length: rollouts }, (_, k) => replySeed(run.seed, c.key, k)), template };
      });
      // Contexts of one conversation follow each other: a batch continues the last one's cache as far as they agree.
      const results = await model.generateBatch(prompts, { temperature, maxNewTokens, reusePrefix: true });
      part.forEach((c, j) => {
        replies[c.key] = results[j]!.map((r, k) => ({ seed: prompts[j]!.seeds[k]!, text: replyWithCalls(r.content, messageCalls({ tool_calls: r.toolCalls })), reward: 0, votes: [] }));
        generated.push(...results[j]!.map((r) => ({
          content: r.content, reasoning: r.reasoning ?? null, tokens: r.tokens.length, toolCalls: r.toolCalls.length, toolCallErrors: r.toolCallErrors.length,
        })));
      });
      const done = Math.min(i + CONTEXTS_PER_BATCH, contexts.length);
      run.onProgress?.(m.name, done, contexts.length, `${m.name}: replayed ${done}/${contexts.length} contexts (${rollouts} replies each)`);
    }
  } finally {
    await model.close();
  }
  return false;
}

/** Labels every generated reply, a context at a time (its K × m votes asked together); true when stopped. */
async function judgeAll(contexts: readonly ReplayContext[], models: readonly ReplayModel[], run: ReplayRun, out: Replayed): Promise<boolean> {
  const completer = await openCompleter(run.settings.judge!);
  out.judged = true; // from here, what is judged counts (a stop keeps the contexts judged under every model)
  try {
    for (const m of models) {
      const replies = out.replies.get(m.name)!;
      for (const [i, c] of contexts.entries()) {
        await breathe();
        if (run.shouldStop?.()) return true;
        await Promise.all((replies[c.key] ?? []).map(async (reply) => {
          const verdict = await judgeReplay(completer, { ...c, reply: reply.text }, { votes: run.settings.votes, seed: reply.seed });
          reply.reward = verdict.reward;
          reply.votes = verdict.votes;
        }));
        run.onProgress?.(m.name, i + 1, contexts.length, `${m.name}: judged ${i + 1}/${contexts.length} replayed contexts`);
      }
    }
  } finally {
    await completer.close();
  }
  return false;
}

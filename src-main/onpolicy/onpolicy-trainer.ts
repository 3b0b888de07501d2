/**
 * On-policy training (docs/design.md §On-policy training): the student learns from its own
 * samples. Each step:
 *
 *   1. takes the step's contexts (./contexts.ts contextsForStep: seeded, held-out sessions never
 *      among them),
 *   2. sets the generation engine's LoRA inputs to the current weights and generates K rollouts
 *      of each context with them (../rollout/manager.ts: tools, limits, seeds), scoring and
 *      appending each episode to <out>/episodes.jsonl as it finishes (./step-rollouts.ts),
 *   3. turns the episodes into rows (old = the rollout log-probs, tool turns masked) and trains
 *      them as one batch: E PPO epochs over minibatches (../train/ppo-batch.ts),
 *   4. logs one step line (the batch's metrics, the episodes and their mean reward), and
 *      checkpoints every `saveEvery` steps.
 *
 * The engine that generates and the step that trains run the same model with the same LoRA
 * weights, so the first epoch's drift |logp − old| is near 0.
 *
 * Like ../train/trainer.ts, this runs in whatever thread calls it; the app and the CLI host
 * it in a worker (./onpolicy-thread.ts). It takes the same hooks and sends the same events.
 */
import fs from 'node:fs';
import path from 'node:path';
import { EPISODES_FILE } from '../../src-shared/rollout.js';
import { openCompleter } from '../judge/backends.js';
import type { ChatCompleter } from '../judge/llm-judge.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { ModelEngine } from '../model/inference-engine.js';
import type { Quantize } from '../model/quantize.js';
import { ChatTokenizer } from '../model/tokenizer.js';
import { builtinTools } from '../rollout/builtin-tools.js';
import { EpisodeWriter, readEpisodes } from '../rollout/episodes-file.js';
import { enginePolicy, type Policy } from '../rollout/policy.js';
import { ToolRegistry } from '../rollout/tools.js';
import { loopbackUrl, userTools } from '../rollout/user-tools.js';
import { DEFAULT_PERSIST, Store } from '../store/database.js';
import type { TrainerHooks, TrainResult } from '../train/run-events.js';
import { openRunStep, runLoop } from '../train/run-loop.js';
import { RunEvaluator, assertNoHeldOutRows } from '../train/train-eval.js';
import { TrainerLog } from '../train/trainer-log.js';
import { CONTEXTS_FILE, stepContexts, teacherPromptIds, type StepContext } from './contexts.js';
import { savedForm, type OnPolicyTrainSettings, type OnPolicyTrainerOptions } from './options.js';
import { claimOutFolder, prepare, resolveOptions } from './prepare.js';
import { rolloutBatches } from './rollout-batches.js';
import type { Scorer } from './scoring.js';

export interface OnPolicyHooks extends TrainerHooks {
  /**
   * Generates with this policy instead of the engine's own (tests drive the loop with a
   * scripted one). Called once, with the engine whose LoRA inputs follow the training.
   */
  policy?: (engine: ModelEngine) => Policy;
}

export interface OnPolicyResult extends TrainResult {
  /** Episodes in <out>/episodes.jsonl at the end. */
  episodes: number;
  episodesFile: string;
}

/**
 * Whether the rollouts' engine lets ONNX Runtime prepack its matmul weights (docs/design.md
 * §QLoRA). Packed, each session keeps a private copy beside the weight file the step maps. An
 * fp32 engine reads the mapped file unpacked at a few percent of decode speed, so the run holds
 * the weights once; MatMulNBits unpacked expands every block on every call (the head's too), so
 * a quantised engine decodes many times slower and holds as much private memory: it stays packed.
 */
export function rolloutPrepack(quantize: Quantize): boolean {
  return quantize !== 'none';
}

/**
 * The registry of a run's tools: the built-in ones (search_history over the database, when
 * there is one, never showing a held-out session) and the user's.
 */
async function openTools(settings: OnPolicyTrainSettings, dbPath: string | undefined, hidden: string[]): Promise<{ registry: ToolRegistry; store?: Store }> {
  const s = settings.onPolicy;
  // Database contexts offer no tools, so only a task file's run reads the database.
  const store = s.source === 'tasks' && dbPath && fs.existsSync(dbPath) ? await Store.open(dbPath, DEFAULT_PERSIST, 'read') : undefined;
  const mine = s.toolUrl ? userTools(s.userTools, loopbackUrl(s.toolUrl)) : [];
  return { registry: new ToolRegistry([...builtinTools({ store, hiddenSessions: hidden }), ...mine], { timeoutMs: s.toolTimeoutMs }), store };
}

/** Runs (or resumes) an on-policy run to the end or to a stop request. */
export async function trainOnPolicy(options: OnPolicyTrainerOptions, hooks: OnPolicyHooks = {}): Promise<OnPolicyResult> {
  const emit = hooks.onEvent ?? (() => {});
  const shouldStop = hooks.shouldStop ?? (() => false);
  const o = resolveOptions(options);
  emit({ type: 'status', phase: 'loading', message: `opening ${o.modelDir}` });
  const checkpoint = Checkpoint.open(o.modelDir);
  const tokenizer = ChatTokenizer.load(o.modelDir);
  emit({ type: 'status', phase: 'preparing', message: 'reading the contexts' });
  const p = prepare(o, checkpoint, tokenizer);
  const { settings } = p;
  const left = Object.entries(p.skipped).map(([why, n]) => `${n} × ${why}`).join(', ');
  if (left) emit({ type: 'status', phase: 'preparing', message: `${p.contexts.length} sample${p.contexts.length === 1 ? '' : 's'} as contexts; left out: ${left}` });
  const heldOut = o.heldOut ?? { sessionIds: [], samples: [] };
  const contextOrigins = p.contexts.map((c) => ('sample' in c ? { sessionId: c.sample.sessionId, origin: c.id } : { origin: c.id }));
  assertNoHeldOutRows(contextOrigins, new Set(heldOut.sessionIds));
  const evaluator = RunEvaluator.create(heldOut, tokenizer, { maxLength: settings.maxLength, seed: settings.seed, batchSize: settings.batchSize });
  const { registry, store } = await openTools(settings, o.dbPath, [...new Set([...heldOut.sessionIds, ...(o.hiddenFromSearch ?? [])])]);
  const log = new TrainerLog(o.outDir);
  const closers: (() => Promise<void> | void)[] = [() => store?.close()];
  try {
    // A task naming a tool the run does not have is refused before the folder is touched.
    const contexts = stepContexts(p.contexts, registry, path.join(o.outDir, CONTEXTS_FILE));
    claimOutFolder(o, p, log);
    if (o.heldOut) log.append({ type: 'held_out', sessions: heldOut.sessionIds.length, samples: heldOut.samples.length });

    const step = await openRunStep(checkpoint, settings, emit, o);
    closers.push(() => step.close());
    const engine = ModelEngine.open(settings.modelDir, {
      device: settings.device, threads: settings.threads ?? undefined, lora: settings.lora, precision: settings.precision ?? undefined,
      quantize: settings.quantize, prepack: rolloutPrepack(settings.quantize),
    }, tokenizer);
    closers.push(() => engine.close());
    const judge = await openJudge(settings, emit);
    if (judge) closers.push(() => judge.close());

    const episodesFile = path.join(o.outDir, EPISODES_FILE);
    const previous = readEpisodes(episodesFile);
    const { writer, notes } = EpisodeWriter.open(episodesFile);
    closers.push(() => writer.close());
    for (const note of [...previous.notes, ...notes]) emit({ type: 'status', phase: 'preparing', message: note });
    const policy = hooks.policy?.(engine) ?? enginePolicy(engine, { temperature: settings.onPolicy.temperature, topP: settings.onPolicy.topP });
    const source = rolloutBatches({
      settings, contexts, skipped: p.skipped, engine, policy, tools: registry, scorer: scorer(settings, step, judge, tokenizer), writer,
      written: previous.episodes.filter((e) => e.step >= p.startStep), emit, shouldStop,
    });
    const result = await runLoop({
      outDir: o.outDir, settings, savedSettings: savedForm(settings), progress: p, dataSha256: p.contextsSha, step, checkpoint, log, emit, shouldStop,
      evaluator, evalEvery: o.evalEvery, heldOut: { sessions: heldOut.sessionIds.length, samples: heldOut.samples.length }, source,
    });
    return { ...result, episodes: readEpisodes(episodesFile).episodes.length, episodesFile };
  } finally {
    for (const close of closers.reverse()) await close();
  }
}

async function openJudge(settings: OnPolicyTrainSettings, emit: NonNullable<TrainerHooks['onEvent']>): Promise<ChatCompleter | null> {
  const spec = settings.onPolicy.judge;
  if (!spec) return null;
  emit({ type: 'status', phase: 'loading', message: `opening the replay judge (${spec.backend === 'local' ? spec.modelDir : spec.model})` });
  return openCompleter(spec);
}

function scorer(settings: OnPolicyTrainSettings, step: Scorer['step'], judge: ChatCompleter | null, tokenizer: ChatTokenizer): Scorer {
  const teacherPrompts = new Map<string, number[]>();
  return {
    method: settings.method, step, maxLength: settings.maxLength, judge, votes: settings.onPolicy.votes,
    teacherPrompt: (context: StepContext) => {
      let ids = teacherPrompts.get(context.id);
      if (!ids) teacherPrompts.set(context.id, (ids = teacherPromptIds(tokenizer, context)));
      return ids;
    },
  };
}

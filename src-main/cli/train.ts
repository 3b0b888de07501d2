// `hindsight train`: trains a LoRA adapter with Binary RL, On-Policy Distillation or
// both, through ONNX Runtime in a worker thread. Without --data it trains on the database's
// labelled samples; --out receives the PEFT adapter, trainer_log.jsonl, dataset.jsonl and
// checkpoints/. Progress goes to stderr; --json prints the result as one object.
import fs from 'node:fs';
import { UserError } from '../../src-shared/types.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { withWorkspace, type Workspace } from '../workspace/workspace.js';
import type { HeldOutSet } from '../train/train-eval.js';
import { signed } from '../../src-shared/eval-report.js';
import type { EvalLogLine, StepLog } from '../../src-shared/trainer-log-line.js';
import { parseTargets } from '../train/lora.js';
import { startTraining } from '../train/trainer-thread.js';
import type { TrainerEvent, TrainerOptions } from '../train/trainer.js';
import {
  defaultEpsHigh, defaultPrecision, LOSS_AGGS, OPD_TOPK_ON, OPTIMIZER_KINDS, overLengthNote, QUANTIZE_CHOICES, RECOMPUTE_AUTO_FROM, RECOMPUTE_MODES, TRAIN_DEFAULTS as D, TRAIN_METHODS,
  type LossAgg, type OptimizerKind, type RecomputeMode, type TrainMethod,
} from '../../src-shared/training.js';
import { knownLossMetrics, methodRecord, orList } from '../../src-shared/training-methods.js';
import { boundFlag, DB_OPTION, ranged, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';
import { DEVICE_HELP, DEVICE_OPTION, deviceFlag, modelFlag, precisionFlag, quantizeFlag } from './model-flags.js';
import { ADVANTAGE_ESTIMATORS, PPO_DEFAULTS as P, type AdvantageEstimator } from '../../src-shared/rollout.js';
import { isOnPolicyCommand, ON_POLICY_EPOCHS_NOTE, ON_POLICY_OPTIONS, ON_POLICY_STEPS_NOTE, runOnPolicy } from './train-on-policy.js';
import { ON_POLICY_DEFAULTS } from '../../src-shared/rollout.js';
import { rolloutsOf, type MemoryRun } from '../../src-shared/train-memory.js';
import type { MemoryVerdict } from '../../src-shared/memory-verdict.js';
import { checkRunMemory, stepPlan } from '../train/memory-check.js';
import { resumePoint } from '../train/trainer.js';

const num = (x: number) => String(x);
const PPO = 'advantages and PPO epochs (docs/design.md §Advantage estimators)';

export const spec = {
  name: 'train',
  synopsis: '--model DIR --out ADAPTER_DIR [options] | --resume RUN_DIR [options to change]',
  about: 'Trains a LoRA adapter with Binary RL, On-Policy Distillation or both, through ONNX Runtime.\n' +
    "Without --data it trains on the database's labelled samples. ADAPTER_DIR receives the PEFT adapter,\n" +
    'trainer_log.jsonl, dataset.jsonl and checkpoints/. Progress goes to stderr; Ctrl+C stops after the\n' +
    'current step and keeps a checkpoint. An --out folder that already holds a run is never written over\n' +
    "silently: continue it with --resume, or start over with --overwrite. With --on-policy it trains on the\n" +
    "model's own rollouts instead (of a task file's contexts, or the database's samples) and also writes\n" +
    'episodes.jsonl and contexts.jsonl.',
  options: {
    model: { type: 'string', value: 'DIR', help: "the base model (a Hugging Face checkpoint folder, a .gguf file, or a name 'hindsight models' lists)", required: 'unless --resume' },
    out: { type: 'string', value: 'ADAPTER_DIR', help: 'the folder that receives the run', required: 'unless --resume' },
    method: { type: 'string', value: TRAIN_METHODS.join('|'), help: TRAIN_METHODS.map((m) => `${m}: ${methodRecord(m).label}`).join(', '), otherwise: D.method },
    data: { type: 'string', value: 'IN.jsonl', help: 'pre-tokenised rows to train on', otherwise: "the database's labelled samples" },
    steps: { type: 'string', value: 'N', help: ranged('steps', 'training steps (a batch each; on-policy: a round of rollouts each)'), otherwise: `one epoch, ⌈rows / batch size⌉; ${ON_POLICY_STEPS_NOTE}` },
    'batch-size': { type: 'string', value: 'B', help: ranged('batchSize', 'samples per update'), otherwise: num(D.batchSize) },
    'micro-batch': {
      type: 'string', value: 'N', otherwise: 'the most rows the memory estimate fits in the available memory',
      help: ranged('microBatch', "rows per pass of the step: a batch's gradients are summed over passes of N rows, then one update (the same update; less memory, a little more time)"),
    },
    lr: { type: 'string', value: 'X', help: ranged('lr', 'learning rate, constant'), otherwise: D.lr.toExponential() },
    optimizer: { type: 'string', value: OPTIMIZER_KINDS.join('|'), help: `the optimizer (AdamW betas ${D.betas.join('/')}, eps ${D.adamEps})`, otherwise: D.optimizer },
    'max-grad-norm': { type: 'string', value: 'X', help: ranged('maxGradNorm', 'global gradient-norm clip, 0 off'), otherwise: num(D.maxGradNorm) },
    'lora-r': { type: 'string', value: 'R', help: ranged('loraR', 'LoRA rank'), otherwise: num(D.loraR) },
    'lora-alpha': { type: 'string', value: 'A', help: ranged('loraAlpha', 'LoRA alpha; scaling alpha / r'), otherwise: num(D.loraAlpha) },
    targets: { type: 'string', value: 'LIST', help: 'adapted linears, comma-separated, or all', otherwise: D.targets.join(',') },
    'init-adapter': { type: 'string', value: 'DIR', help: 'start from this PEFT adapter (its r, alpha and targets)', otherwise: 'a new adapter' },
    'eps-low': { type: 'string', value: 'X', help: ranged('epsLow', 'PPO-clip lower epsilon'), otherwise: num(D.epsLow) },
    'eps-high': { type: 'string', value: 'X', help: ranged('epsHigh', 'PPO-clip upper epsilon'), otherwise: epsHighDefaults() },
    'kl-beta': { type: 'string', value: 'X', help: ranged('klBeta', 'k3 KL penalty against the base model'), otherwise: num(D.klBeta) },
    'w-opd': { type: 'string', value: 'X', help: ranged('wOpd', "combine's weight of the teacher gap"), otherwise: num(D.wOpd) },
    'w-rl': { type: 'string', value: 'X', help: ranged('wRl', "combine's weight of the reward"), otherwise: num(D.wRl) },
    'loss-agg': {
      type: 'string', value: LOSS_AGGS.join('|'), otherwise: `${D.lossAgg}; a resumed run its own`,
      help: "token-mean: every trained token of a batch weighs the same; sample-mean: each sample's mean over its tokens, averaged over the batch's samples (OpenClaw-RL's)",
    },
    'opd-topk': {
      type: 'string', value: 'K', otherwise: '0: the sampled token; a resumed run its own',
      help: ranged('opdTopK', `opd, combine: distil the hinted teacher's top K tokens and a tail bin at each reply token (reverse KL), instead of the sampled token's advantage; ${OPD_TOPK_ON} is OpenClaw-RL's`),
    },
    'max-length': {
      type: 'string', value: 'N', otherwise: `${num(D.maxLength)}, or the model's own maximum if less`,
      help: ranged('maxLength', "tokens per row, at most the model's own; a longer chat keeps its system turn and latest turns, a longer reply is skipped and counted"),
    },
    seed: { type: 'string', value: 'S', help: ranged('seed', 'data order and LoRA initialisation'), otherwise: num(D.seed) },
    device: { ...DEVICE_OPTION.device, help: DEVICE_HELP.replace('the model runs', 'the step runs'), otherwise: D.device },
    precision: DEVICE_OPTION.precision,
    quantize: {
      type: 'string', value: QUANTIZE_CHOICES.join('|'), otherwise: `${D.quantize}; a resumed run its own`,
      help: "the frozen base stored as int8 or int4 blocks (QLoRA: about a quarter or an eighth of its fp32 memory); LoRA, its gradients, the optimizer and the loss stay fp32",
    },
    threads: { type: 'string', value: 'N', help: ranged('threads', 'ONNX Runtime intra-op threads'), otherwise: "ONNX Runtime's own choice" },
    recompute: {
      type: 'string', value: RECOMPUTE_MODES.join('|'), otherwise: `${D.recompute}: on from --max-length ${RECOMPUTE_AUTO_FROM}`,
      help: "recompute each layer's activations in the backward pass: less memory, more time per step",
    },
    'save-every': { type: 'string', value: 'N', help: ranged('saveEvery', 'checkpoint every N steps and at the end, 0 only at the end'), otherwise: num(D.saveEvery) },
    'eval-every': {
      type: 'string', value: 'N', otherwise: 'about ten times a run, ⌈steps / 10⌉',
      help: ranged('evalEvery', "evaluate the database's held-out samples every N steps, at the start and at the end; 0 only at the start and end"),
    },
    resume: {
      type: 'string', value: 'DIR', otherwise: 'a new run',
      help: 'continue the run in DIR from its last checkpoint, with every option it was started with except those given again (--out defaults to DIR, --model to its model)',
    },
    'ignore-memory': {
      type: 'boolean', default: false,
      help: 'start even when the memory estimate printed before the run is more than the machine has available (HINDSIGHT_MEMORY_BUDGET=SIZE plans for less than it has)',
    },
    overwrite: { type: 'boolean', default: false, help: 'start over in an --out folder that holds a run (the old run is removed)' },
    merge: { type: 'boolean', default: false, help: "also write the merged weights under ADAPTER_DIR/merged: the adapter added to the model's own fp32 weights, never to a --quantize copy" },
    advantage: {
      type: 'string', value: ADVANTAGE_ESTIMATORS.join('|'), group: PPO, otherwise: P.advantage,
      help: 'reward: A = r; grpo: r − the mean of the rows of its "group"; gae: a value head and GAE over token "rewards"',
    },
    'grpo-std': { type: 'boolean', group: PPO, help: "grpo: also divide by the group's standard deviation (+1e-6)" },
    'normalize-advantages': { type: 'boolean', group: PPO, help: "standardise the advantages over the batch's response tokens" },
    'ppo-epochs': { type: 'string', value: 'E', group: PPO, help: ranged('ppoEpochs', 'passes over each batch, each minibatch one update against the same old'), otherwise: `${num(P.ppoEpochs)}; ${ON_POLICY_EPOCHS_NOTE}` },
    minibatch: { type: 'string', value: 'M', group: PPO, help: ranged('minibatch', 'rows per update within a batch, 0 the whole batch'), otherwise: num(P.minibatch) },
    gamma: { type: 'string', value: 'X', group: PPO, help: ranged('gamma', "gae's discount γ"), otherwise: num(P.gamma) },
    lambda: { type: 'string', value: 'X', group: PPO, help: ranged('lambda', "gae's trace λ"), otherwise: num(P.lambda) },
    'value-clip': { type: 'string', value: 'X', group: PPO, help: ranged('valueClip', "gae: how far a value may move from its start-of-batch value before the value loss's clip binds"), otherwise: num(P.valueClip) },
    'value-coef': { type: 'string', value: 'X', group: PPO, help: ranged('valueCoef', "gae: the value loss's weight in the total loss"), otherwise: num(P.valueCoef) },
    ...ON_POLICY_OPTIONS,
    ...DB_OPTION,
    ...jsonOption('print the result as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

/** "0.28; 0.2 with --method opd": the default method's ε_high, then each other value with the methods that start from it. */
function epsHighDefaults(): string {
  const byValue = new Map<number, string[]>();
  for (const m of TRAIN_METHODS) byValue.set(defaultEpsHigh(m), [...(byValue.get(defaultEpsHigh(m)) ?? []), m]);
  const first = defaultEpsHigh(D.method);
  return [String(first), ...[...byValue].filter(([v]) => v !== first).map(([v, methods]) => `${v} with --method ${orList(methods)}`)].join('; ');
}

/** The loss's own metrics in a step line ("kl 1.20e-3 clip 0.000" for PPO-clip): those of every known loss that the line carries. */
function lossMetricsText(l: StepLog): string {
  const line = l as unknown as Record<string, unknown>;
  return knownLossMetrics().filter((m) => typeof line[m.field] === 'number').map((m) => m.show(line[m.field] as number)).join(' ');
}

function describeEval(l: EvalLogLine): string {
  const m = l.likelihood.margin;
  const margin = m.mean === null ? 'no margin (needs +1 and −1 samples)' : `margin ${signed(m.mean, 3)}${ci(m.ci)}`;
  const delta = l.margin_delta.mean === null ? '' : `, vs base ${signed(l.margin_delta.mean, 3)}${ci(l.margin_delta.ci)}`;
  const gap = l.hints.gap.mean === null ? '' : `; hint gap ${l.hints.gap.mean.toFixed(3)} (${l.hints.n} hinted)`;
  return `held-out eval at step ${l.step}: ${margin}${delta}${gap}`;
}

const ci = (c: [number, number] | null) => (c ? ` [${c[0].toFixed(3)}, ${c[1].toFixed(3)}]` : '');

function describe(event: TrainerEvent): string | null {
  if (event.type === 'status') return event.message;
  if (event.type === 'executionProvider') return `execution provider: ${event.name}`;
  if (event.type === 'eval') return describeEval(event.log);
  if (event.type === 'overLength') return overLengthNote(event.count, event.maxLength, event.positions);
  const l = event.log;
  const gap = l.teacher_student_gap === null ? '' : ` gap ${l.teacher_student_gap.toFixed(4)}`;
  const ppo = (l.drift === undefined ? '' : ` drift ${l.drift.toExponential(2)}`) +
    (l.value_loss === undefined ? '' : ` vloss ${l.value_loss.toFixed(4)}`) + (l.explained_variance === undefined ? '' : ` ev ${l.explained_variance.toFixed(3)}`) +
    (l.topk_kl === undefined ? '' : ` topk-kl ${l.topk_kl.toFixed(4)}`) +
    (l.episodes === undefined ? '' : ` episodes ${l.episodes} reward ${l.episode_reward_mean === null || l.episode_reward_mean === undefined ? '–' : l.episode_reward_mean.toFixed(2)}`);
  return `step ${l.step}/${l.total_steps} loss ${l.loss.toFixed(4)} reward ${l.reward_mean.toFixed(2)} adv ${l.adv_mean.toFixed(4)}${gap} ` +
    `${lossMetricsText(l)}${ppo} |g| ${l.grad_norm.toFixed(4)} ${l.tokens_per_s.toFixed(0)} tok/s eta ${l.eta_s.toFixed(0)} s`;
}

/**
 * The database's samples for `method` (none from a held-out session), and the held-out split;
 * refuses, naming what is missing, when it gives nothing to learn from.
 */
async function databaseSamples(db: string, method: TrainMethod): Promise<{ samples: TrainingSample[]; heldOut: HeldOutSet }> {
  if (!fs.existsSync(db)) throw new UserError(`no database at ${db}: import chats first, or give --data FILE`);
  return withWorkspace(db, (ws) => {
    const nothing = ws.nothingToTrain(method);
    if (nothing) throw new UserError(nothing);
    return { samples: ws.trainingSamples({ method }), heldOut: heldOutSet(ws) };
  }, { access: 'read' });
}

function heldOutSet(ws: Workspace): HeldOutSet {
  return { sessionIds: ws.heldOutSessionIds(), samples: ws.evaluationSamples('heldout') };
}

/**
 * A resumed run of database rows checks them against, and evaluates, the database's split as
 * it is now. A run of --data rows has no session to check, and the database may be unrelated
 * to it: it gets a split only from a --db given explicitly.
 */
async function databaseHeldOut(db: string | undefined, resumeDir: string): Promise<HeldOutSet | undefined> {
  const path = db ?? (trainedFromDatabase(resumeDir) ? defaultDbPath() : undefined);
  if (path === undefined || !fs.existsSync(path)) return undefined;
  return withWorkspace(path, heldOutSet, { access: 'read' });
}

/** Whether the run in `dir` trained on database rows (its dataset.jsonl lines name their session). */
function trainedFromDatabase(dir: string): boolean {
  try {
    const first = fs.readFileSync(`${dir}/dataset.jsonl`, 'utf8').split('\n', 1)[0]!;
    return typeof JSON.parse(first).session_id === 'string';
  } catch {
    return false;
  }
}

/**
 * The memory estimate before the run starts (src-shared/train-memory.ts): it chooses the rows
 * per pass (--micro-batch, else the most that fit) and, for --recompute auto on a CUDA GPU,
 * whether the step recomputes, which go into `o` (stepPlan), and is printed beside the
 * machine's memory (and the GPU's); a run that cannot fit even one row at a time (or the
 * --micro-batch asked for) is refused in one line naming what would fit, unless
 * --ignore-memory. A resumed run is estimated with its own settings and the flags given again,
 * and chooses its micro-batch anew. An on-policy run updates on contexts × rollouts rows (or its
 * minibatch) at once, and holds the decode cache of the contexts × rollouts sequences it generates.
 */
async function checkMemory(v: Record<string, unknown>, o: TrainerOptions, onPolicy: boolean): Promise<string | null> {
  const saved = o.resume ? (resumePoint(o.resume).settings as unknown as SavedSettings) : undefined;
  const modelDir = o.modelDir ?? saved?.modelDir;
  if (!modelDir) return null;
  const method = o.method ?? saved?.method ?? D.method;
  const device = o.device ?? saved?.device ?? D.device;
  const contexts = boundFlag('contextsPerStep', v['contexts-per-step'] as string | undefined) ?? saved?.onPolicy?.contextsPerStep ?? ON_POLICY_DEFAULTS.contextsPerStep;
  const rollouts = boundFlag('rollouts', v.rollouts as string | undefined) ?? saved?.onPolicy?.rollouts ?? ON_POLICY_DEFAULTS.rollouts;
  const maxTurns = boundFlag('maxTurns', v['max-turns'] as string | undefined) ?? saved?.onPolicy?.maxTurns ?? ON_POLICY_DEFAULTS.maxTurns;
  const minibatch = o.minibatch ?? saved?.ppo?.minibatch ?? 0;
  const rows = onPolicy ? contexts * rollouts : o.batchSize ?? saved?.batchSize ?? D.batchSize;
  const run = (shape: { maxPositionEmbeddings: number }): MemoryRun => ({
    batchSize: minibatch > 0 ? Math.min(minibatch, rows) : rows,
    ...(o.microBatch !== undefined ? { microBatch: o.microBatch } : {}),
    loraR: o.loraR ?? saved?.lora.r ?? D.loraR,
    targets: o.targets ?? saved?.lora.targets ?? D.targets,
    quantize: o.quantize ?? saved?.quantize ?? D.quantize,
    recompute: o.recompute ?? saved?.recompute ?? D.recompute,
    optimizer: o.optimizer ?? saved?.optimizer.kind ?? D.optimizer,
    teacher: methodRecord(method).uses.hint || onPolicy || (o.klBeta ?? saved?.loss.klBeta ?? 0) > 0,
    device,
    precision: o.precision ?? saved?.precision ?? defaultPrecision(device),
    maxLength: o.maxLength ?? saved?.maxLength ?? Math.min(D.maxLength, shape.maxPositionEmbeddings),
    ...(onPolicy ? { rollouts: rolloutsOf(contexts, rollouts, maxTurns) } : {}),
  });
  let verdict: MemoryVerdict;
  try {
    verdict = await checkRunMemory(modelDir, run, 'cli');
  } catch {
    return null; // the trainer says what is wrong with the model, in its words
  }
  if (verdict.refusal && !v['ignore-memory']) throw new UserError(verdict.refusal);
  Object.assign(o, stepPlan(verdict));
  return `memory: ${verdict.summary}` + (verdict.refusal ? '\nmemory: more than this machine has; starting anyway (--ignore-memory)' : '');
}

/** What checkMemory reads of a resumed run's saved settings (./run-settings.ts RunSettings; an on-policy run's also carry `onPolicy`). */
interface SavedSettings {
  modelDir: string; method: TrainMethod; batchSize: number; maxLength: number; device: NonNullable<TrainerOptions['device']>;
  lora: { r: number; targets: NonNullable<TrainerOptions['targets']> }; quantize?: MemoryRun['quantize']; recompute: RecomputeMode;
  optimizer: { kind: OptimizerKind }; loss: { klBeta: number }; precision: MemoryRun['precision'] | null; ppo?: { minibatch: number };
  onPolicy?: { contextsPerStep: number; rollouts: number; maxTurns: number };
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  // Unset options stay undefined: a new run takes the defaults, a resumed run its own.
  if (!v.resume && (!v.model || !v.out)) throw new UsageError(`--model and --out are required (or --resume DIR)\n${USAGE}`);
  if (v.method !== undefined && !TRAIN_METHODS.includes(v.method as TrainMethod)) throw new UsageError(`--method must be ${orList(TRAIN_METHODS)}, got '${v.method}'`);
  if (v.optimizer !== undefined && !OPTIMIZER_KINDS.includes(v.optimizer as OptimizerKind)) throw new UsageError(`--optimizer must be adamw or sgd, got '${v.optimizer}'`);
  if (v.recompute !== undefined && !RECOMPUTE_MODES.includes(v.recompute as RecomputeMode)) throw new UsageError(`--recompute must be auto, on or off, got '${v.recompute}'`);
  if (v.advantage !== undefined && !ADVANTAGE_ESTIMATORS.includes(v.advantage as AdvantageEstimator)) throw new UsageError(`--advantage must be ${ADVANTAGE_ESTIMATORS.join(', ')}, got '${v.advantage}'`);
  if (v['loss-agg'] !== undefined && !LOSS_AGGS.includes(v['loss-agg'] as LossAgg)) throw new UsageError(`--loss-agg must be ${orList(LOSS_AGGS)}, got '${v['loss-agg']}'`);
  let targets;
  try {
    targets = v.targets === undefined ? undefined : parseTargets(v.targets);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const options: TrainerOptions = {
    modelDir: v.model === undefined ? undefined : modelFlag(v.model, '--model', v.db),
    outDir: v.out,
    dataFile: v.data,
    method: v.method as TrainMethod | undefined,
    steps: boundFlag('steps', v.steps),
    batchSize: boundFlag('batchSize', v['batch-size']),
    microBatch: boundFlag('microBatch', v['micro-batch']),
    lr: boundFlag('lr', v.lr),
    optimizer: v.optimizer as OptimizerKind | undefined,
    loraR: boundFlag('loraR', v['lora-r']),
    loraAlpha: boundFlag('loraAlpha', v['lora-alpha']),
    targets,
    initAdapter: v['init-adapter'],
    seed: boundFlag('seed', v.seed),
    device: v.device === undefined ? undefined : deviceFlag(v.device),
    precision: precisionFlag(v.precision),
    quantize: v.quantize === undefined ? undefined : quantizeFlag(v.quantize),
    threads: boundFlag('threads', v.threads),
    recompute: v.recompute as RecomputeMode | undefined,
    saveEvery: boundFlag('saveEvery', v['save-every']),
    resume: v.resume,
    overwrite: v.overwrite,
    maxGradNorm: boundFlag('maxGradNorm', v['max-grad-norm']),
    klBeta: boundFlag('klBeta', v['kl-beta']),
    maxLength: boundFlag('maxLength', v['max-length']),
    wOpd: boundFlag('wOpd', v['w-opd']),
    wRl: boundFlag('wRl', v['w-rl']),
    lossAgg: v['loss-agg'] as LossAgg | undefined,
    opdTopK: boundFlag('opdTopK', v['opd-topk']),
    epsLow: boundFlag('epsLow', v['eps-low']),
    epsHigh: boundFlag('epsHigh', v['eps-high']),
    merge: v.merge,
    evalEvery: boundFlag('evalEvery', v['eval-every']),
    advantage: v.advantage as AdvantageEstimator | undefined,
    grpoStd: v['grpo-std'],
    normalizeAdvantages: v['normalize-advantages'],
    ppoEpochs: boundFlag('ppoEpochs', v['ppo-epochs']),
    minibatch: boundFlag('minibatch', v.minibatch),
    gamma: boundFlag('gamma', v.gamma),
    lambda: boundFlag('lambda', v.lambda),
    valueClip: boundFlag('valueClip', v['value-clip']),
    valueCoef: boundFlag('valueCoef', v['value-coef']),
  };
  if (options.resume && (options.initAdapter || options.dataFile)) throw new UsageError('--resume continues a run as it was: it takes no --init-adapter or --data');
  const onPolicy = isOnPolicyCommand(v);
  // The memory estimate first: a run that cannot fit is refused before the database is read.
  // Its summary is printed with the run's first event, so that a run refused for another
  // reason (a used --out folder, nothing to train on) still says so in one line.
  let memoryLine = await checkMemory(v, options, onPolicy);
  // An on-policy run reads the database its own way (./train-on-policy.ts).
  if (!onPolicy && !options.dataFile && !options.resume) Object.assign(options, await databaseSamples(v.db ?? defaultDbPath(), options.method ?? D.method));
  else if (!onPolicy && options.resume) options.heldOut = await databaseHeldOut(v.db, options.resume);
  const controller = new AbortController();
  const onSignal = () => {
    process.stderr.write('stopping after the current step (a checkpoint is kept)…\n');
    controller.abort();
  };
  process.once('SIGINT', onSignal);
  try {
    const onEvent = (e: TrainerEvent) => {
      if (memoryLine) process.stderr.write(memoryLine + '\n');
      memoryLine = null;
      const line = describe(e);
      if (line) process.stderr.write(line + '\n');
    };
    const rollouts = onPolicy ? await runOnPolicy(v, options, controller.signal, onEvent) : null;
    const result = rollouts ?? await startTraining(options, { signal: controller.signal, onEvent });
    const episodes = rollouts ? { episodes: rollouts.episodes, episodes_file: rollouts.episodesFile } : {};
    if (rollouts) process.stderr.write(`${rollouts.episodes} episode(s) in ${rollouts.episodesFile}\n`);
    process.stderr.write(`${result.status}: ${result.steps}/${result.totalSteps} steps on ${result.executionProvider}; adapter in ${result.adapterDir}\n`);
    if (v.json) {
      printJson({
        status: result.status, steps: result.steps, total_steps: result.totalSteps, execution_provider: result.executionProvider,
        adapter_dir: result.adapterDir, checkpoint_dir: result.checkpointDir, log: result.logFile, rows: result.rows,
        skipped: result.skipped, truncated: result.truncated, last: result.last, merged_dir: result.mergedDir ?? null,
        held_out: result.heldOut, last_eval: result.lastEval, eval_file: result.evalFile, ...episodes,
      });
    }
    return result.status === 'finished' ? 0 : 1;
  } finally {
    process.off('SIGINT', onSignal);
  }
};

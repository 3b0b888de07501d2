/**
 * The training loop: rows → batches → teacher / reference log-probs → advantage
 * pieces → one TrainStep update per batch (which computes old = stopgrad(logp) and the
 * advantages in its own forward pass; ./advantages.ts), with the log, checkpoints, resume,
 * cancel, the non-finite stop and the PEFT export.
 *
 * This module runs wherever it is called; ONNX Runtime blocks the calling thread, so the
 * app and the CLI call it through ./run-in-worker.ts, which hosts it in a worker thread.
 * Every setting left out takes its default from src-shared/training.ts.
 *
 * Steps: `steps` (default one epoch, ⌈rows / batch⌉). Step k trains on batch k mod
 * ⌈rows / batch⌉ of epoch ⌊k / ⌈rows / batch⌉⌋, each epoch in its own seeded order, one
 * optimizer update per batch ("1 epoch per batch"). The learning rate is constant.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { defaultEpsHigh, TRAIN_DEFAULTS } from '../../src-shared/training.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { Checkpoint, type ModelConfig } from '../model/hf-checkpoint.js';
import type { LinearTarget } from '../model/decoder.js';
import type { Device } from '../model/ort-session.js';
import { seededRandom } from '../model/sampling.js';
import { ChatTokenizer } from '../model/tokenizer.js';
import { fillInStepAdvantages, inStepAdvantageMetrics } from './advantages.js';
import { padBatch, responseValues, rowToLine, rowsForStep, rowsFromJsonl, rowsFromSamples, type RowSet, type TrainRow } from './batches.js';
import { findCheckpoint, loadCheckpoint, saveCheckpoint, type TrainerState } from './run-checkpoint.js';
import { writeFileAtomicSync } from '../store/atomic-file.js';
import { DEFAULT_LORA, initLora, loraSpecs } from './lora.js';
import { TrainerLog, type StepLog } from './trainer-log.js';
import { writeMergedModel } from './merge.js';
import { readAdapter, writeAdapter } from './peft.js';
import { createTrainStep, type LossConfig, type LoraConfig, type LoraWeights, type OptimizerConfig, type OptimizerKind, type OptimizerState, type TrainMethod, type TrainStep } from './training-step.js';

export const DATASET_FILE = 'dataset.jsonl';

/** What a run is asked to do (CLI flags, the app's TrainConfig). */
export interface TrainerOptions {
  modelDir: string;
  outDir: string;
  /** Pre-tokenised rows (`hindsight train --data`); otherwise `samples` (the database's). */
  dataFile?: string;
  samples?: TrainingSample[];
  method: TrainMethod;
  /** Total steps; default one epoch. */
  steps?: number;
  batchSize?: number;
  lr?: number;
  optimizer?: OptimizerKind;
  maxGradNorm?: number;
  klBeta?: number;
  epsLow?: number;
  epsHigh?: number;
  wOpd?: number;
  wRl?: number;
  loraR?: number;
  loraAlpha?: number;
  targets?: LinearTarget[];
  initAdapter?: string;
  seed?: number;
  device?: Device;
  threads?: number;
  /** Checkpoint every N steps (0: only at the end). */
  saveEvery?: number;
  /** A previous run's output folder (or checkpoint folder) to continue from. */
  resume?: string;
  maxLength?: number;
  /** Also write the merged weights (W + s·B·A) as model.safetensors under <out>/merged. */
  merge?: boolean;
}

/** The settings that define the run's numbers; saved in every checkpoint, restored on resume. */
export interface RunSettings {
  modelDir: string;
  method: TrainMethod;
  batchSize: number;
  maxLength: number;
  seed: number;
  lora: LoraConfig;
  optimizer: OptimizerConfig;
  loss: LossConfig;
  wOpd: number;
  wRl: number;
  initAdapter: string | null;
}

export type TrainerEvent =
  | { type: 'status'; phase: 'loading' | 'preparing' | 'compiling' | 'training' | 'saving' | 'exporting'; message: string }
  | { type: 'executionProvider'; name: string }
  | { type: 'step'; log: StepLog };

export interface TrainResult {
  status: 'finished' | 'cancelled';
  steps: number;
  totalSteps: number;
  adapterDir: string;
  checkpointDir: string;
  logFile: string;
  executionProvider: string;
  rows: number;
  skipped: Record<string, number>;
  truncated: number;
  last: StepLog | null;
  mergedDir?: string;
}

export interface TrainerHooks {
  onEvent?: (event: TrainerEvent) => void;
  /** Polled between steps; true stops after the current step with a checkpoint. */
  shouldStop?: () => boolean;
}

function positiveInt(name: string, v: number): number {
  if (!Number.isInteger(v) || v < 1) throw new UserError(`${name} must be a whole number ≥ 1, got ${v}`);
  return v;
}

function settingsFrom(o: TrainerOptions, lora: LoraConfig, model: ModelConfig): RunSettings {
  const d = TRAIN_DEFAULTS;
  const lr = o.lr ?? d.lr;
  if (!(lr >= 0) || !Number.isFinite(lr)) throw new UserError(`learning rate must be a finite number ≥ 0, got ${lr}`);
  const maxLength = positiveInt('max length', o.maxLength ?? Math.min(d.maxLength, model.maxPositionEmbeddings));
  return {
    modelDir: path.resolve(o.modelDir),
    method: o.method,
    batchSize: positiveInt('batch size', o.batchSize ?? d.batchSize),
    maxLength,
    seed: o.seed ?? d.seed,
    lora,
    optimizer: {
      kind: o.optimizer ?? d.optimizer, lr, betas: [...d.betas], eps: d.adamEps, weightDecay: d.weightDecay, maxGradNorm: o.maxGradNorm ?? d.maxGradNorm,
    },
    loss: { method: o.method, epsLow: o.epsLow ?? d.epsLow, epsHigh: o.epsHigh ?? defaultEpsHigh(o.method), klBeta: o.klBeta ?? d.klBeta },
    wOpd: o.wOpd ?? d.wOpd,
    wRl: o.wRl ?? d.wRl,
    initAdapter: o.initAdapter ? path.resolve(o.initAdapter) : null,
  };
}

/** LoRA shape from the flags, or from --init-adapter (whose r, alpha and targets win; conflicts are errors). */
function loraFrom(o: TrainerOptions, model: ModelConfig): { lora: LoraConfig; initial?: LoraWeights } {
  if (!o.initAdapter) {
    const lora = { r: o.loraR ?? DEFAULT_LORA.r, alpha: o.loraAlpha ?? DEFAULT_LORA.alpha, targets: o.targets ?? DEFAULT_LORA.targets };
    positiveInt('LoRA rank', lora.r);
    if (!(lora.alpha > 0)) throw new UserError(`LoRA alpha must be > 0, got ${lora.alpha}`);
    return { lora };
  }
  const adapter = readAdapter(o.initAdapter, model);
  const conflict = (flag: string, given: unknown, found: unknown) => {
    throw new UserError(`--init-adapter ${o.initAdapter} has ${flag} ${JSON.stringify(found)}, but ${JSON.stringify(given)} was asked for; drop the flag or use another adapter`);
  };
  if (o.loraR !== undefined && o.loraR !== adapter.lora.r) conflict('r', o.loraR, adapter.lora.r);
  if (o.loraAlpha !== undefined && o.loraAlpha !== adapter.lora.alpha) conflict('lora_alpha', o.loraAlpha, adapter.lora.alpha);
  if (o.targets !== undefined && o.targets.join() !== adapter.lora.targets.join()) conflict('targets', o.targets.join(','), adapter.lora.targets.join(','));
  return { lora: adapter.lora, initial: adapter.weights };
}

function emptyOptimizerState(weights: LoraWeights, kind: OptimizerKind): OptimizerState {
  const zeros = () => new Map([...weights].map(([k, v]) => [k, new Float32Array(v.length)]));
  return { step: 0, m: kind === 'adamw' ? zeros() : new Map(), v: kind === 'adamw' ? zeros() : new Map() };
}

function sha256(text: string): string {
  return crypto.createHash('sha256').update(text).digest('hex');
}

function allFinite(weights: LoraWeights): string | null {
  for (const [k, v] of weights) for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i]!)) return k;
  return null;
}

interface Prepared {
  settings: RunSettings;
  rows: TrainRow[];
  rowSet: Pick<RowSet, 'skipped' | 'truncated'>;
  weights: LoraWeights;
  optimizer: OptimizerState;
  startStep: number;
  totalSteps: number;
  elapsedBefore: number;
  datasetSha: string;
  /** The output folder of the run a resume continues (its checkpoint is already on disk there). */
  resumedIn?: string;
}

/** Reads the rows for a new run and writes them as <out>/dataset.jsonl. */
function prepareRows(o: TrainerOptions, settings: RunSettings, tokenizer: ChatTokenizer, model: ModelConfig): { set: RowSet; sha: string } {
  let set: RowSet;
  if (o.dataFile) set = rowsFromJsonl(o.dataFile, settings.method, model.vocabSize, settings.maxLength);
  else if (o.samples) set = rowsFromSamples(o.samples, tokenizer, settings.method, settings.maxLength);
  else throw new UserError('nothing to train on: give --data FILE or a database with labelled samples');
  if (set.rows.length === 0) {
    const why = Object.entries(set.skipped).map(([k, n]) => `${n} × ${k}`).join(', ');
    const source = o.dataFile ?? 'the database';
    throw new UserError(`nothing to train on with method ${settings.method} in ${source}${why ? ` (left out: ${why})` : ''}; label samples ±1${settings.method === 'rl' ? '' : ' or add hints'} first`);
  }
  const text = set.rows.map((r) => JSON.stringify(rowToLine(r)) + '\n').join('');
  writeFileAtomicSync(path.join(o.outDir, DATASET_FILE), Buffer.from(text, 'utf8'));
  return { set, sha: sha256(text) };
}

function prepare(o: TrainerOptions, checkpoint: Checkpoint, tokenizer: ChatTokenizer, log: TrainerLog): Prepared {
  const model = checkpoint.config;
  if (o.resume) {
    const saved = loadCheckpoint<RunSettings>(o.resume, model);
    const settings = saved.state.settings;
    const resumeRoot = path.resolve(saved.dir, '..', '..');
    const datasetFile = path.join(resumeRoot, DATASET_FILE);
    if (!fs.existsSync(datasetFile)) throw new UserError(`${resumeRoot}: missing ${DATASET_FILE}, which the checkpoint was trained on`);
    const text = fs.readFileSync(datasetFile, 'utf8');
    if (sha256(text) !== saved.state.datasetSha256) throw new UserError(`${datasetFile} changed since the checkpoint was written; cannot resume bit-for-bit`);
    const set = rowsFromJsonl(datasetFile, settings.method, model.vocabSize, settings.maxLength);
    if (path.resolve(o.outDir) !== resumeRoot) writeFileAtomicSync(path.join(o.outDir, DATASET_FILE), Buffer.from(text, 'utf8'));
    const kept = log.truncateTo(saved.state.step, path.join(resumeRoot, 'trainer_log.jsonl'));
    const totalSteps = o.steps ?? saved.state.totalSteps;
    if (totalSteps <= saved.state.step) throw new UserError(`the checkpoint in ${saved.dir} has done ${saved.state.step} steps already; ask for more with --steps (now ${totalSteps})`);
    return {
      settings, rows: set.rows, rowSet: set, weights: saved.weights, optimizer: saved.optimizer,
      startStep: saved.state.step, totalSteps, elapsedBefore: kept.at(-1)?.elapsed_s ?? 0, datasetSha: saved.state.datasetSha256,
      resumedIn: resumeRoot,
    };
  }
  const { lora, initial } = loraFrom(o, model);
  const settings = settingsFrom(o, lora, model);
  const { set, sha } = prepareRows(o, settings, tokenizer, model);
  const weights = initial ?? initLora(loraSpecs(model, lora.targets), lora.r, settings.seed);
  const perEpoch = Math.ceil(set.rows.length / settings.batchSize);
  log.reset();
  return {
    settings, rows: set.rows, rowSet: set, weights, optimizer: emptyOptimizerState(weights, settings.optimizer.kind),
    startStep: 0, totalSteps: positiveInt('steps', o.steps ?? perEpoch), elapsedBefore: 0, datasetSha: sha,
  };
}

/** Runs (or resumes) a training run to the end or to a stop request. */
export async function train(options: TrainerOptions, hooks: TrainerHooks = {}): Promise<TrainResult> {
  const emit = hooks.onEvent ?? (() => {});
  const outDir = path.resolve(options.outDir);
  fs.mkdirSync(outDir, { recursive: true });
  emit({ type: 'status', phase: 'loading', message: `opening ${options.modelDir}` });
  const checkpoint = Checkpoint.open(options.modelDir);
  const tokenizer = ChatTokenizer.load(options.modelDir);
  const log = new TrainerLog(outDir);
  emit({ type: 'status', phase: 'preparing', message: 'tokenising the training rows' });
  const p = prepare({ ...options, outDir }, checkpoint, tokenizer, log);
  const { settings } = p;
  const specs = loraSpecs(checkpoint.config, settings.lora.targets);

  emit({ type: 'status', phase: 'compiling', message: 'building the training graph' });
  const step = await createTrainStep(checkpoint, {
    lora: settings.lora, optimizer: settings.optimizer, loss: settings.loss, device: options.device ?? TRAIN_DEFAULTS.device, threads: options.threads,
  });
  try {
    if (step.specs.map((s) => s.module).join() !== specs.map((s) => s.module).join()) {
      throw new Error('the training step adapts other modules than the trainer expects');
    }
    emit({ type: 'executionProvider', name: step.executionProvider });
    return await loop(options, outDir, p, step, checkpoint, log, emit, hooks.shouldStop ?? (() => false));
  } finally {
    await step.close();
  }
}

async function loop(
  options: TrainerOptions, outDir: string, p: Prepared, step: TrainStep, checkpoint: Checkpoint, log: TrainerLog,
  emit: (e: TrainerEvent) => void, shouldStop: () => boolean,
): Promise<TrainResult> {
  const { settings, rows, totalSteps } = p;
  const specs = step.specs;
  let weights = p.weights;
  let optimizer = p.optimizer;
  let done = p.startStep;
  let last: StepLog | null = null;
  const saveEvery = options.saveEvery ?? TRAIN_DEFAULTS.saveEvery;
  const started = Date.now();
  const baseModel = settings.modelDir;
  const save = (): string => {
    savedStep = done;
    emit({ type: 'status', phase: 'saving', message: `checkpoint at step ${done}` });
    const state: TrainerState<RunSettings> = { format: 1, step: done, totalSteps, settings, datasetSha256: p.datasetSha, savedAt: new Date().toISOString() };
    return saveCheckpoint(outDir, { state, lora: settings.lora, specs, weights, optimizer, baseModel });
  };
  // A checkpoint exists from the start, so a stop or failure at step 1 still leaves one to
  // resume; a resumed run in its own folder already has it (and must not rewrite it in place).
  let savedStep = p.resumedIn === outDir ? p.startStep : -1;
  let checkpointDir = savedStep === done ? findCheckpoint(outDir) : save();
  emit({ type: 'status', phase: 'training', message: `${rows.length} rows, ${totalSteps - done} steps to go` });
  let status: TrainResult['status'] = 'finished';

  while (done < totalSteps) {
    if (shouldStop()) {
      status = 'cancelled';
      break;
    }
    const t0 = Date.now();
    const { rows: batchRows, epoch } = rowsForStep(rows, settings.batchSize, done, settings.seed, seededRandom);
    const batch = padBatch(batchRows);
    const teacher = await teacherLogprobs(step, settings.method, batchRows);
    if (settings.loss.klBeta > 0) batch.refLogprobs = await step.baseLogprobs(batch);
    // old := the policy's log-probs with the gradient stopped, inside the step's own forward
    // pass (one update per batch), so no separate forward pass computes it first.
    const advantageInputs = { method: settings.method, weights: { wOpd: settings.wOpd, wRl: settings.wRl }, rows: batchRows, batch, teacher };
    fillInStepAdvantages(advantageInputs);
    const result = await step.step(batch, weights, optimizer);
    const adv = inStepAdvantageMetrics({ ...advantageInputs, policyOld: result.logprobs });
    const stepNo = done + 1;
    const { loss, gradNorm } = result.metrics;
    const badWeight = allFinite(result.weights);
    if (!Number.isFinite(loss) || !Number.isFinite(gradNorm) || badWeight) {
      const what = !Number.isFinite(loss) ? `the loss is ${loss}` : !Number.isFinite(gradNorm) ? `the gradient norm is ${gradNorm}` : `the update made ${badWeight} non-finite`;
      throw new UserError(`training stopped at step ${stepNo}: ${what} (lr ${settings.optimizer.lr}); the last good checkpoint (step ${done}) is kept in ${checkpointDir}`);
    }
    weights = result.weights;
    optimizer = result.state;
    done = stepNo;
    const seconds = (Date.now() - t0) / 1000;
    const elapsed = p.elapsedBefore + (Date.now() - started) / 1000;
    const perStep = (Date.now() - started) / 1000 / (done - p.startStep);
    const realTokens = batch.attentionMask.reduce((a, m) => a + Number(m), 0);
    last = {
      step: done, total_steps: totalSteps, epoch, loss, reward_mean: adv.rewardMean, adv_mean: adv.advMean,
      teacher_student_gap: adv.teacherStudentGap, approx_kl: result.metrics.approxKl, clipfrac: result.metrics.clipfrac,
      grad_norm: gradNorm, lr: settings.optimizer.lr, tokens: result.metrics.tokens, tokens_per_s: seconds > 0 ? realTokens / seconds : 0,
      elapsed_s: elapsed, eta_s: perStep * (totalSteps - done), execution_provider: step.executionProvider,
    };
    log.append(last);
    emit({ type: 'step', log: last });
    if (saveEvery > 0 && done % saveEvery === 0 && done < totalSteps) checkpointDir = save();
  }
  if (savedStep !== done) checkpointDir = save();
  emit({ type: 'status', phase: 'exporting', message: `writing the adapter to ${outDir}` });
  writeAdapter(outDir, { lora: settings.lora, specs, weights, baseModel });
  let mergedDir: string | undefined;
  if (options.merge) mergedDir = writeMergedModel(checkpoint, path.join(outDir, 'merged'), settings.lora, specs, weights);
  return {
    status, steps: done, totalSteps, adapterDir: outDir, checkpointDir, logFile: log.file, executionProvider: step.executionProvider,
    rows: rows.length, skipped: p.rowSet.skipped, truncated: p.rowSet.truncated, last, mergedDir,
  };
}

/** Base-model log-probs of each row's reply on its teacher sequence (OPD); undefined where a row has none. */
async function teacherLogprobs(step: TrainStep, method: TrainMethod, rows: readonly TrainRow[]): Promise<(Float32Array | undefined)[]> {
  const out: (Float32Array | undefined)[] = rows.map(() => undefined);
  if (method === 'rl') return out;
  const withTeacher = rows.map((r, i) => [r, i] as const).filter(([r]) => r.teacher);
  if (!withTeacher.length) return out;
  const spans = withTeacher.map(([r]) => r.teacher!);
  const tb = padBatch(spans);
  const base = await step.baseLogprobs(tb);
  withTeacher.forEach(([, i], j) => (out[i] = responseValues(base, tb.seqLen, j, spans[j]!).slice()));
  return out;
}

/**
 * The training loop: rows → batches → the updates of each batch (./ppo-batch.ts: by default
 * one TrainStep update, which computes old = stopgrad(logp) and the advantages in its own
 * forward pass; with PPO epochs, minibatches or the grpo / gae estimators, several updates
 * against an old fixed for the batch), with the log, checkpoints, resume, cancel, the
 * non-finite stop and the PEFT export (plus the value head of a `gae` run).
 *
 * This module runs wherever it is called; ONNX Runtime blocks the calling thread, so the
 * app and the CLI call it through ./trainer-thread.ts, which hosts it in a worker thread.
 * Every setting left out takes its default from src-shared/training.ts, or on resume the
 * run's own (./run-settings.ts); a folder holding another run is refused unless the run is
 * resumed or overwritten (./run-folder.ts).
 *
 * Steps: `steps` (default one epoch, ⌈rows / batch⌉). Step k trains on batch k mod
 * ⌈rows / batch⌉ of epoch ⌊k / ⌈rows / batch⌉⌋, each epoch in its own seeded order, one
 * optimizer update per batch ("1 epoch per batch") unless PPO epochs or minibatches ask for
 * more; the minibatch order of step k is seeded from (seed, k). The learning rate is constant.
 *
 * Held-out samples (docs/design.md §Evaluation): a row from a held-out session is refused,
 * the log says how many held-out samples there are, and with `heldOut` given the run
 * evaluates them at the start, every `evalEvery` steps and at the end (./train-eval.ts).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { overLengthNote, overLengthReason } from '../../src-shared/training.js';
import { UserError } from '../../src-shared/types.js';
import { recomputeOn } from '../../src-shared/training.js';
import { Checkpoint, type ModelConfig } from '../model/hf-checkpoint.js';
import { seededRandom } from '../model/sampling.js';
import { ChatTokenizer } from '../model/tokenizer.js';
import { rowSelected, rowsForStep, rowsFromSamples, type RowSet, type TrainRow } from './batches.js';
import { rowToLine, rowsFromJsonl } from './data-lines.js';
import { missingGroup } from './estimators.js';
import { minibatchRandom, trainBatch } from './ppo-batch.js';
import { writeValueHead, zeroValueHead } from './value-head.js';
import { findCheckpoint, loadCheckpoint, readCheckpointState, resumedProgress, saveCheckpoint, type RunProgress, type TrainerState } from './run-checkpoint.js';
import { checkOutFolder, DATASET_FILE, holdsRun, prepareOutFolder } from './run-folder.js';
import { checkBounds, loraFrom, resumedSettings, settingsFrom, type RunSettings, type TrainerOptions } from './run-settings.js';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import { initLora, loraSpecs } from './lora.js';
import { LOG_FILE, TrainerLog, type EvalLogLine, type StepLog } from './trainer-log.js';
import { assertNoHeldOutRows, defaultEvalEvery, RunEvaluator } from './train-eval.js';
import { RunEvaluations } from './run-evaluations.js';
import { writeMergedModel } from './merge.js';
import { writeAdapter } from './peft.js';
import { checkFiniteBatch } from './non-finite.js';
import { createTrainStep, type LoraWeights, type OptimizerKind, type OptimizerState, type TrainStep } from './training-step.js';

export { DATASET_FILE } from './run-folder.js';
export type { RunSettings, TrainerOptions } from './run-settings.js';

export type TrainerEvent =
  | { type: 'status'; phase: 'loading' | 'preparing' | 'compiling' | 'generating' | 'training' | 'evaluating' | 'saving' | 'exporting'; message: string }
  | { type: 'executionProvider'; name: string }
  /** Samples left out because they do not fit the run's max length (src-shared/training.ts overLengthNote). */
  | { type: 'overLength'; count: number; maxLength: number }
  | { type: 'step'; log: StepLog }
  | { type: 'eval'; log: EvalLogLine };

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
  /** The held-out sessions and samples the caller named (none trained on). */
  heldOut: { sessions: number; samples: number };
  /** The last held-out evaluation, and eval.json, when there were held-out samples to measure. */
  lastEval: EvalLogLine | null;
  evalFile: string | null;
}

export interface TrainerHooks {
  onEvent?: (event: TrainerEvent) => void;
  /** Polled between steps; true stops after the current step with a checkpoint. */
  shouldStop?: () => boolean;
}

/** A new run's optimizer state: step 0, zero moments for AdamW. */
export function emptyOptimizerState(weights: LoraWeights, kind: OptimizerKind): OptimizerState {
  const zeros = () => new Map([...weights].map(([k, v]) => [k, new Float32Array(v.length)]));
  return { step: 0, m: kind === 'adamw' ? zeros() : new Map(), v: kind === 'adamw' ? zeros() : new Map() };
}

export function sha256(text: string): string {
  return crypto.createHash('sha256').update(text).digest('hex');
}

interface Prepared extends RunProgress {
  settings: RunSettings;
  rows: TrainRow[];
  rowSet: Pick<RowSet, 'skipped' | 'truncated'>;
  datasetSha: string;
  /** The rows as dataset.jsonl holds them. */
  datasetText: string;
}

/** Options with the output folder resolved and the model known (given, or the resumed run's). */
type ResolvedOptions = TrainerOptions & { outDir: string; modelDir: string };

/** Reads the rows for a new run, as <out>/dataset.jsonl will hold them. */
function prepareRows(o: ResolvedOptions, settings: RunSettings, tokenizer: ChatTokenizer, model: ModelConfig): { set: RowSet; text: string } {
  let set: RowSet;
  if (o.dataFile) set = rowsFromJsonl(o.dataFile, settings.method, model.vocabSize, settings.maxLength, settings.ppo.advantage);
  else if (o.samples) set = rowsFromSamples(o.samples, tokenizer, settings.method, settings.maxLength);
  else throw new UserError('nothing to train on: give --data FILE or a database with labelled samples');
  const source = o.dataFile ?? 'the database';
  if (set.rows.length === 0) {
    const why = Object.entries(set.skipped).map(([k, n]) => `${n} × ${k}`).join(', ');
    throw new UserError(`nothing to train on with method ${settings.method} in ${source}${why ? ` (left out: ${why})` : ''}; label samples ±1${settings.method === 'rl' ? '' : ' or add hints'} first`);
  }
  const missing = settings.ppo.advantage === 'grpo' ? missingGroup(set.rows) : null;
  if (missing) throw new UserError(`${source}: ${missing}`);
  // Rows kept by the at-least-one rule train with advantage 0: alone they would "finish" a
  // run that learnt nothing (docs/design.md §At-least-one). grpo and gae keep every row.
  if (settings.ppo.advantage === 'reward' && !set.rows.some((r) => rowSelected(settings.method, r.reward, r.teacher !== undefined))) {
    throw new UserError(`nothing to train on with method ${settings.method} in ${source}: all ${set.rows.length} rows are kept without signal (${settings.method === 'rl' ? 'no ±1 reward' : settings.method === 'opd' ? 'no hint' : 'neither ±1 reward nor hint'})`);
  }
  return { set, text: set.rows.map((r) => JSON.stringify(rowToLine(r)) + '\n').join('') };
}

function prepareResume(o: ResolvedOptions & { resume: string }, model: ModelConfig): Prepared {
  const saved = loadCheckpoint<RunSettings>(o.resume, model);
  const settings = resumedSettings(saved.state.settings, o);
  const resumeRoot = path.resolve(saved.dir, '..', '..');
  const datasetFile = path.join(resumeRoot, DATASET_FILE);
  if (!fs.existsSync(datasetFile)) throw new UserError(`${resumeRoot}: missing ${DATASET_FILE}, which the checkpoint was trained on`);
  const text = fs.readFileSync(datasetFile, 'utf8');
  if (sha256(text) !== saved.state.datasetSha256) throw new UserError(`${datasetFile} changed since the checkpoint was written; cannot resume bit-for-bit`);
  const set = rowsFromJsonl(datasetFile, settings.method, model.vocabSize, settings.maxLength, settings.ppo.advantage);
  return {
    ...resumedProgress(saved, resumeRoot, o.steps, settings.ppo.advantage),
    settings, rows: set.rows, rowSet: set, datasetSha: saved.state.datasetSha256, datasetText: text,
  };
}

/** Everything the run needs, read and checked; nothing is written yet. */
function prepare(o: ResolvedOptions, checkpoint: Checkpoint, tokenizer: ChatTokenizer): Prepared {
  const model = checkpoint.config;
  if (o.resume) return prepareResume({ ...o, resume: o.resume }, model);
  const { lora, initial } = loraFrom(o, model);
  const settings = settingsFrom(o, lora, model);
  const { set, text } = prepareRows(o, settings, tokenizer, model);
  const weights = initial ?? initLora(loraSpecs(model, lora.targets), lora.r, settings.seed);
  const perEpoch = Math.ceil(set.rows.length / settings.batchSize);
  const valueHead = settings.ppo.advantage === 'gae' ? zeroValueHead(model.hiddenSize) : undefined;
  return {
    settings, rows: set.rows, rowSet: set, weights, valueHead, optimizer: emptyOptimizerState(valueHead ? new Map([...weights, ...valueHead]) : weights, settings.optimizer.kind),
    startStep: 0, totalSteps: o.steps ?? perEpoch, elapsedBefore: 0, datasetSha: sha256(text), datasetText: text,
  };
}

/**
 * Takes the output folder (removing an old run there on overwrite) once the run is known to
 * start, so a run refused for its options or its data leaves the folder as it was; then
 * writes the rows and the log the run starts from.
 */
function claimOutFolder(o: ResolvedOptions, p: Prepared, log: TrainerLog): void {
  prepareOutFolder(o.outDir, { resumeRoot: p.resumedIn, overwrite: o.overwrite });
  if (p.resumedIn !== o.outDir) writeFileAtomicSync(path.join(o.outDir, DATASET_FILE), Buffer.from(p.datasetText, 'utf8'), PRIVATE_FILE_MODE);
  if (p.resumedIn) {
    log.truncateTo(p.startStep, path.join(p.resumedIn, LOG_FILE));
    return;
  }
  log.reset();
  const over = overLengthCount(p);
  if (over > 0) log.append({ note: overLengthNote(over, p.settings.maxLength), skipped_over_length: over, max_length: p.settings.maxLength });
}

/** How many samples the run left out for their length (docs/design.md §Training runs). */
function overLengthCount(p: Prepared): number {
  return p.rowSet.skipped[overLengthReason(p.settings.maxLength)] ?? 0;
}

/**
 * Where a run goes and from which model: checks the output folder (a folder holding another
 * run needs resume or overwrite: ./run-folder.ts) and, on resume, takes the run's own model
 * unless one is given.
 */
function resolveOptions(options: TrainerOptions): ResolvedOptions {
  // Every number within its bounds before anything is read or written (src-shared/training.ts TRAIN_BOUNDS).
  checkBounds(options);
  if (!options.outDir && !options.resume) throw new UserError('a new run needs an output folder (--out)');
  const resumed = options.resume ? resumePoint(options.resume) : undefined;
  // An on-policy run (src-main/onpolicy/) saves its rollout settings beside these; its own loop resumes it.
  if (resumed && 'onPolicy' in resumed.settings) throw new UserError(`${resumed.root} holds an on-policy run: resume it as one (hindsight train --resume ${resumed.root} does)`);
  // Refuses a change the resume cannot make before any work starts.
  if (resumed) resumedSettings(resumed.settings, options);
  const modelDir = options.modelDir ?? resumed?.settings.modelDir;
  if (!modelDir) throw new UserError('a new run needs a model folder (--model)');
  const outDir = path.resolve(options.outDir ?? resumed!.root);
  checkOutFolder(outDir, { resumeRoot: resumed?.root, overwrite: options.overwrite });
  return { ...options, outDir, modelDir };
}

/** The folder and saved settings of the run `--resume dir` continues. */
export function resumePoint(dir: string): { root: string; settings: RunSettings } {
  if (!fs.existsSync(dir)) throw new UserError(`--resume ${dir}: no such folder`);
  let found: string;
  try {
    found = findCheckpoint(dir);
  } catch (err) {
    if (err instanceof UserError && holdsRun(dir)) {
      throw new UserError(`${dir} holds no checkpoint to resume from (the run stopped before its first one); start it over with --overwrite`);
    }
    throw err;
  }
  const { state } = readCheckpointState<RunSettings>(found);
  if (typeof state.settings?.modelDir !== 'string') throw new UserError(`${found}: the trainer state has no run settings to resume with`);
  return { root: path.resolve(found, '..', '..'), settings: state.settings };
}

/** Runs (or resumes) a training run to the end or to a stop request. */
export async function train(options: TrainerOptions, hooks: TrainerHooks = {}): Promise<TrainResult> {
  const emit = hooks.onEvent ?? (() => {});
  const o = resolveOptions(options);
  emit({ type: 'status', phase: 'loading', message: `opening ${o.modelDir}` });
  const checkpoint = Checkpoint.open(o.modelDir);
  const tokenizer = ChatTokenizer.load(o.modelDir);
  const log = new TrainerLog(o.outDir);
  emit({ type: 'status', phase: 'preparing', message: 'tokenising the training rows' });
  const p = prepare(o, checkpoint, tokenizer);
  const heldOut = o.heldOut ?? { sessionIds: [], samples: [] };
  assertNoHeldOutRows(p.rows, new Set(heldOut.sessionIds));
  const evaluator = RunEvaluator.create(heldOut, tokenizer, { maxLength: p.settings.maxLength, seed: p.settings.seed, batchSize: p.settings.batchSize });
  claimOutFolder(o, p, log);
  if (o.heldOut) log.append({ type: 'held_out', sessions: heldOut.sessionIds.length, samples: heldOut.samples.length });
  const { settings } = p;
  if (overLengthCount(p) > 0) emit({ type: 'overLength', count: overLengthCount(p), maxLength: settings.maxLength });
  const specs = loraSpecs(checkpoint.config, settings.lora.targets);

  emit({ type: 'status', phase: 'compiling', message: 'building the training graph' });
  const step = await createTrainStep(checkpoint, {
    lora: settings.lora, optimizer: settings.optimizer, loss: settings.loss, device: settings.device, threads: settings.threads ?? undefined,
    recompute: recomputeOn(settings.recompute, settings.maxLength), maxLength: settings.maxLength, precision: settings.precision ?? undefined,
    value: settings.ppo.advantage === 'gae' ? { clip: settings.ppo.valueClip, coef: settings.ppo.valueCoef } : undefined,
  });
  try {
    if (step.specs.map((s) => s.module).join() !== specs.map((s) => s.module).join()) {
      throw new Error('the training step adapts other modules than the trainer expects');
    }
    emit({ type: 'executionProvider', name: step.executionProvider });
    const evals = evaluator && new RunEvaluations(evaluator, step, log, emit, p.totalSteps, o.evalEvery ?? defaultEvalEvery(p.totalSteps));
    const result = await loop(o.outDir, p, step, checkpoint, log, emit, hooks.shouldStop ?? (() => false), evals);
    return { ...result, heldOut: { sessions: heldOut.sessionIds.length, samples: heldOut.samples.length } };
  } finally {
    await step.close();
  }
}

async function loop(
  outDir: string, p: Prepared, step: TrainStep, checkpoint: Checkpoint, log: TrainerLog,
  emit: (e: TrainerEvent) => void, shouldStop: () => boolean, evals: RunEvaluations | null,
): Promise<Omit<TrainResult, 'heldOut'>> {
  const { settings, rows, totalSteps } = p;
  const specs = step.specs;
  let weights = p.weights;
  let optimizer = p.optimizer;
  let valueHead = p.valueHead;
  let done = p.startStep;
  let last: StepLog | null = null;
  const { saveEvery } = settings;
  const started = Date.now();
  const baseModel = settings.modelDir;
  const save = (): string => {
    savedStep = done;
    emit({ type: 'status', phase: 'saving', message: `checkpoint at step ${done}` });
    const state: TrainerState<RunSettings> = { format: 1, step: done, totalSteps, settings, datasetSha256: p.datasetSha, savedAt: new Date().toISOString() };
    return saveCheckpoint(outDir, { state, lora: settings.lora, specs, weights, optimizer, baseModel, valueHead });
  };
  // A checkpoint exists from the start, so a stop or failure at step 1 still leaves one to
  // resume; a resumed run in its own folder already has it (and must not rewrite it in place).
  let savedStep = p.resumedIn === outDir ? p.startStep : -1;
  let checkpointDir = savedStep === done ? findCheckpoint(outDir) : save();
  await evals?.start(done, weights);
  emit({ type: 'status', phase: 'training', message: `${rows.length} rows, ${totalSteps - done} steps to go` });
  let status: TrainResult['status'] = 'finished';

  while (done < totalSteps) {
    if (shouldStop()) {
      status = 'cancelled';
      break;
    }
    const t0 = Date.now();
    const { rows: batchRows, epoch } = rowsForStep(rows, settings.batchSize, done, settings.seed, seededRandom);
    const result = await trainBatch({
      step, rows: batchRows, weights, optimizer, valueHead, random: minibatchRandom(settings.seed, done), groupPool: rows,
      settings: { method: settings.method, wOpd: settings.wOpd, wRl: settings.wRl, klBeta: settings.loss.klBeta, ppo: settings.ppo },
    });
    const stepNo = done + 1;
    const m = result.metrics;
    checkFiniteBatch(result, { step: stepNo, lr: settings.optimizer.lr, savedStep, checkpointDir });
    weights = result.weights;
    optimizer = result.optimizer;
    valueHead = result.valueHead;
    done = stepNo;
    const seconds = (Date.now() - t0) / 1000;
    const elapsed = p.elapsedBefore + (Date.now() - started) / 1000;
    const perStep = (Date.now() - started) / 1000 / (done - p.startStep);
    last = {
      step: done, total_steps: totalSteps, epoch, loss: m.loss, reward_mean: m.rewardMean, adv_mean: m.advMean,
      teacher_student_gap: m.teacherStudentGap, approx_kl: m.approxKl, clipfrac: m.clipfrac,
      grad_norm: m.gradNorm, lr: settings.optimizer.lr, tokens: m.tokens, tokens_per_s: seconds > 0 ? m.inputTokens / seconds : 0,
      elapsed_s: elapsed, eta_s: perStep * (totalSteps - done), execution_provider: step.executionProvider,
      ...(m.drift !== undefined ? { drift: m.drift } : {}),
      ...(m.valueLoss !== undefined ? { value_loss: m.valueLoss } : {}),
      ...(m.explainedVariance !== undefined ? { explained_variance: m.explainedVariance } : {}),
    };
    log.append(last);
    emit({ type: 'step', log: last });
    if (saveEvery > 0 && done % saveEvery === 0 && done < totalSteps) checkpointDir = save();
    await evals?.after(done, weights);
  }
  await evals?.after(done, weights, true); // a cancelled run is measured where it stopped
  if (savedStep !== done) checkpointDir = save();
  emit({ type: 'status', phase: 'exporting', message: `writing the adapter to ${outDir}` });
  writeAdapter(outDir, { lora: settings.lora, specs, weights, baseModel });
  if (valueHead) writeValueHead(outDir, valueHead);
  let mergedDir: string | undefined;
  if (settings.merge) mergedDir = writeMergedModel(checkpoint, path.join(outDir, 'merged'), settings.lora, specs, weights);
  const evalFile = evals?.writeReport(outDir) ?? null;
  return {
    status, steps: done, totalSteps, adapterDir: outDir, checkpointDir, logFile: log.file, executionProvider: step.executionProvider,
    rows: rows.length, skipped: p.rowSet.skipped, truncated: p.rowSet.truncated, last, mergedDir, lastEval: evals?.last ?? null, evalFile,
  };
}

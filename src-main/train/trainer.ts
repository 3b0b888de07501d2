/**
 * The offline trainer: a fixed set of rows → batches → the updates of each batch
 * (./ppo-batch.ts: by default one TrainStep update, which computes old = stopgrad(logp) and
 * the advantages in its own forward pass; with PPO epochs, minibatches or the grpo / gae
 * estimators, several updates against an old fixed for the batch). This module reads and
 * checks the run, claims its folder and supplies its batches (`rowBatches`); the run loop
 * (./run-loop.ts), which the on-policy trainer shares, does the rest: the log, checkpoints,
 * cancel, the non-finite stop, the evaluations and the PEFT export (plus the value head of a
 * `gae` run).
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
import { methodRecord, MISSING_SIGNAL, signalKind } from '../../src-shared/training-methods.js';
import { Checkpoint, type ModelConfig } from '../model/hf-checkpoint.js';
import { seededRandom } from '../model/sampling.js';
import { ChatTokenizer } from '../model/tokenizer.js';
import { rowSelected, rowsForStep, rowsFromSamples, type RowSet, type TrainRow } from './batches.js';
import { rowToLine, rowsFromJsonl } from './data-lines.js';
import { missingGroup } from './grpo-gae.js';
import { zeroValueHead } from './value-head.js';
import { findCheckpoint, loadCheckpoint, readCheckpointState, resumedProgress, type RunProgress } from './run-checkpoint.js';
import type { TrainerHooks, TrainResult } from './run-events.js';
import { checkOutFolder, DATASET_FILE, holdsRun, prepareOutFolder } from './run-folder.js';
import { openRunStep, runLoop, type BatchSource } from './run-loop.js';
import { checkBounds, loraFrom, resumedSettings, settingsFrom, type RunSettings, type TrainerOptions } from './run-settings.js';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import { initLora, loraSpecs } from './lora.js';
import { LOG_FILE, TrainerLog } from './trainer-log.js';
import { assertNoHeldOutRows, RunEvaluator } from './train-eval.js';
import type { LoraWeights, OptimizerKind, OptimizerState } from './training-step.js';

export { DATASET_FILE } from './run-folder.js';
export type { RunSettings, StepPlan, TrainerOptions } from './run-settings.js';

export type { TrainerEvent, TrainerHooks, TrainResult } from './run-events.js';

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
    throw new UserError(`nothing to train on with method ${settings.method} in ${source}${why ? ` (left out: ${why})` : ''}; ${methodRecord(settings.method).uses.hint ? 'label samples ±1 or add hints' : 'label samples ±1'} first`);
  }
  const missing = settings.ppo.advantage === 'grpo' ? missingGroup(set.rows) : null;
  if (missing) throw new UserError(`${source}: ${missing}`);
  // Rows kept by the at-least-one rule train with advantage 0: alone they would "finish" a
  // run that learnt nothing (docs/design.md §At-least-one). grpo and gae keep every row.
  if (settings.ppo.advantage === 'reward' && !set.rows.some((r) => rowSelected(settings.method, r.reward, r.teacher !== undefined))) {
    throw new UserError(`nothing to train on with method ${settings.method} in ${source}: all ${set.rows.length} rows are kept without signal (${MISSING_SIGNAL[signalKind(settings.method)]})`);
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
function claimOutFolder(o: ResolvedOptions, p: Prepared, log: TrainerLog, positions: number): void {
  prepareOutFolder(o.outDir, { resumeRoot: p.resumedIn, overwrite: o.overwrite });
  if (p.resumedIn !== o.outDir) writeFileAtomicSync(path.join(o.outDir, DATASET_FILE), Buffer.from(p.datasetText, 'utf8'), PRIVATE_FILE_MODE);
  if (p.resumedIn) {
    log.truncateTo(p.startStep, path.join(p.resumedIn, LOG_FILE));
    return;
  }
  log.reset();
  const over = overLengthCount(p);
  if (over > 0) log.append({ note: overLengthNote(over, p.settings.maxLength, positions), skipped_over_length: over, max_length: p.settings.maxLength });
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
  claimOutFolder(o, p, log, checkpoint.config.maxPositionEmbeddings);
  if (o.heldOut) log.append({ type: 'held_out', sessions: heldOut.sessionIds.length, samples: heldOut.samples.length });
  const { settings } = p;
  if (overLengthCount(p) > 0) emit({ type: 'overLength', count: overLengthCount(p), maxLength: settings.maxLength, positions: checkpoint.config.maxPositionEmbeddings });
  const step = await openRunStep(checkpoint, settings, emit, o);
  try {
    return await runLoop({
      outDir: o.outDir, settings, savedSettings: settings, progress: p, dataSha256: p.datasetSha, step, checkpoint, log, emit,
      shouldStop: hooks.shouldStop ?? (() => false), evaluator, evalEvery: o.evalEvery,
      heldOut: { sessions: heldOut.sessionIds.length, samples: heldOut.samples.length }, source: rowBatches(p),
    });
  } finally {
    await step.close();
  }
}

/**
 * The offline run's batches: step k trains on batch k mod ⌈rows / batch⌉ of its epoch, each
 * epoch in its own seeded order (./batches.ts rowsForStep); GRPO's groups are drawn from all
 * the rows, so a group's baseline does not depend on how the batches cut it.
 */
function rowBatches(p: Prepared): BatchSource {
  const { rows, settings } = p;
  return {
    summary: { rows: rows.length, skipped: p.rowSet.skipped, truncated: p.rowSet.truncated },
    startMessage: (stepsToGo) => `${rows.length} rows, ${stepsToGo} steps to go`,
    batch: async (index) => {
      const { rows: batchRows, epoch } = rowsForStep(rows, settings.batchSize, index, settings.seed, seededRandom);
      return { epoch, rows: batchRows, groupPool: rows };
    },
  };
}

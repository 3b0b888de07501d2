/**
 * The run loop (docs/design.md §Training runs, "The run loop"): the lifecycle every training
 * run shares, offline (./trainer.ts) or on-policy (../onpolicy/onpolicy-trainer.ts). Where the
 * two differ is only where a step's rows come from, so that is the one thing a trainer hands
 * in: a {@link BatchSource}. The offline trainer's source cuts batches from its fixed row
 * set; the on-policy one rolls out, scores and builds the step's rows each step.
 *
 * The loop owns, in order:
 *   - the first checkpoint (so a stop or failure at step 1 still leaves one to resume; a run
 *     resumed in its own folder already has it, and a checkpoint is never rewritten in place),
 *   - the held-out evaluation at the start (./run-evaluations.ts),
 *   - each step: the stop flag, the source's batch, the update (./ppo-batch.ts) and the
 *     non-finite stop (./non-finite.ts), the step's line in trainer_log.jsonl and its `step`
 *     event, a checkpoint every `saveEvery` steps, the evaluations due,
 *   - at the end or on a stop: the last evaluation, the final checkpoint, the adapter (plus the
 *     value head of a `gae` run, and the merged model when asked), eval.json, and the result.
 *
 * The step counter comes from the checkpoint (RunProgress.startStep), so a resumed run never
 * repeats an update, and every per-step choice (a batch's rows, its minibatch order) is a pure
 * function of (seed, step), so a resumed run continues as the straight one would have.
 */
import path from 'node:path';
import { recomputeOn } from '../../src-shared/training.js';
import { methodLoss, methodRecord, type LossSpec } from '../../src-shared/training-methods.js';
import { lossMetricFields } from '../../src-shared/trainer-log-line.js';
import type { Checkpoint } from '../model/hf-checkpoint.js';
import { conversionLines, reportWeightsProgress } from '../model/weight-file.js';
import type { TrainRow } from './batches.js';
import { loraSpecs } from './lora.js';
import { writeMergedModel } from './merge.js';
import { checkFiniteBatch } from './non-finite.js';
import { writeAdapter } from './peft.js';
import { minibatchRandom, trainBatch, type BatchMetrics, type BatchState } from './ppo-batch.js';
import { informativeRows } from './grpo-gae.js';
import { findCheckpoint, saveCheckpoint, type RunProgress, type TrainerState } from './run-checkpoint.js';
import { RunEvaluations } from './run-evaluations.js';
import type { EmitEvent, TrainResult } from './run-events.js';
import type { RunSettings, StepPlan } from './run-settings.js';
import { defaultEvalEvery, type RunEvaluator } from './train-eval.js';
import type { StepLog, TrainerLog } from './trainer-log.js';
import { createTrainStep } from './step-engine.js';
import type { LoraWeights, TrainStep } from './training-step.js';
import { writeValueHead } from './value-head.js';

/** One step's batch, as a run's batch source gives it. */
export interface BatchForStep {
  /** The epoch the step is in (its log line's `epoch`). */
  epoch: number;
  /** The rows the step trains on; none: the step makes no update and logs zeros. */
  rows: readonly TrainRow[];
  /** The rows GRPO's groups are drawn from (ppo-batch.ts TrainBatchInput.groupPool); default `rows`. */
  groupPool?: readonly TrainRow[];
  /** The teacher's log-probs of each row, when the source has them already (TrainBatchInput.teacher). */
  teacher?: readonly (Float32Array | undefined)[];
  /** Fields the source adds to the step's log line (on-policy: its episodes and their mean reward). */
  logFields?: Partial<StepLog>;
}

/** Where a run's batches come from: the one thing the offline and the on-policy runs do differently. */
export interface BatchSource {
  /** The `rows`, `skipped` and `truncated` of the run's result. */
  readonly summary: Pick<TrainResult, 'rows' | 'skipped' | 'truncated'>;
  /** A `training` status line sent once before the first step, if the source has one. */
  startMessage?(stepsToGo: number): string;
  /**
   * The batch of step `index` (counted from 0), with the adapter's weights as they are before
   * the step; 'stopped' when a stop request came while the source was making it (the run then
   * ends as cancelled, without the step).
   */
  batch(index: number, weights: LoraWeights): Promise<BatchForStep | 'stopped'>;
}

export interface RunLoopInput<S extends RunSettings> {
  outDir: string;
  settings: S;
  /** The settings as each checkpoint's trainer_state.json keeps them (on-policy: without the judge's key). */
  savedSettings: S;
  /** Where the run starts: a new run at step 0, or a resumed checkpoint's state. */
  progress: RunProgress;
  /** sha256 of the file the run trains from (dataset.jsonl or contexts.jsonl); a resume checks it. */
  dataSha256: string;
  step: TrainStep;
  /** The base model (a merged export adds the adapter to it). */
  checkpoint: Checkpoint;
  log: TrainerLog;
  emit: EmitEvent;
  shouldStop: () => boolean;
  /** The held-out samples' evaluator, when the caller named any; `evalEvery` defaults to about ten evaluations a run. */
  evaluator: RunEvaluator | null;
  evalEvery?: number;
  heldOut: TrainResult['heldOut'];
  source: BatchSource;
}

/**
 * The run's training step, built from its settings; the same for both kinds of run. Sends the
 * `compiling` status before (naming the micro-batches and recomputation, when there are) and the
 * `executionProvider` event after. `plan`: rows per pass and whether to recompute, as the memory
 * check chose them (TrainerOptions.microBatch, .recomputeActivations), not settings of the run;
 * without a choice, the whole batch at once and the run's recompute mode at its max length.
 */
export async function openRunStep(checkpoint: Checkpoint, settings: RunSettings, emit: EmitEvent, plan: StepPlan = {}): Promise<TrainStep> {
  const { microBatch } = plan;
  const recompute = plan.recomputeActivations ?? recomputeOn(settings.recompute, settings.maxLength);
  const how = [
    ...(microBatch !== undefined && microBatch < settings.batchSize ? [`micro-batches of ${microBatch} row${microBatch === 1 ? '' : 's'}`] : []),
    ...(recompute ? ['recomputing activations'] : []),
  ];
  emit({ type: 'status', phase: 'compiling', message: `building the training graph${how.length ? ` (${how.join(', ')})` : ''}` });
  // The run's first build for this model and form converts its weights (minutes for a 7–8B): said as it goes.
  reportWeightsProgress(conversionLines((message) => emit({ type: 'status', phase: 'compiling', message })));
  let step: TrainStep;
  try {
    step = await createTrainStep(checkpoint, {
      microBatch,
      lora: settings.lora, optimizer: settings.optimizer, loss: settings.loss, device: settings.device, threads: settings.threads ?? undefined,
      recompute, maxLength: settings.maxLength, precision: settings.precision ?? undefined,
      quantize: settings.quantize,
      value: settings.ppo.advantage === 'gae' ? { clip: settings.ppo.valueClip, coef: settings.ppo.valueCoef } : undefined,
    });
  } finally {
    reportWeightsProgress(undefined);
  }
  const expected = loraSpecs(checkpoint.config, settings.lora.targets);
  if (step.specs.map((s) => s.module).join() !== expected.map((s) => s.module).join()) {
    await step.close();
    throw new Error('the training step adapts other modules than the trainer expects');
  }
  emit({ type: 'executionProvider', name: step.executionProvider });
  return step;
}

/** Runs the steps from the run's progress to its total or to a stop, then saves and exports. */
export async function runLoop<S extends RunSettings>(input: RunLoopInput<S>): Promise<TrainResult> {
  const { outDir, settings, progress, step, log, emit, source } = input;
  const { totalSteps } = progress;
  const evals = input.evaluator && new RunEvaluations(input.evaluator, step, log, emit, totalSteps, input.evalEvery ?? defaultEvalEvery(totalSteps));
  let state: BatchState = { weights: progress.weights, optimizer: progress.optimizer, valueHead: progress.valueHead };
  let done = progress.startStep;
  let last: StepLog | null = null;
  const started = Date.now();
  const save = (): string => {
    savedStep = done;
    emit({ type: 'status', phase: 'saving', message: `checkpoint at step ${done}` });
    const trainerState: TrainerState<S> = {
      format: 1, step: done, totalSteps, settings: input.savedSettings, datasetSha256: input.dataSha256, savedAt: new Date().toISOString(),
    };
    return saveCheckpoint(outDir, { state: trainerState, lora: settings.lora, specs: step.specs, ...state, baseModel: settings.modelDir, model: input.checkpoint.config });
  };
  // The step of the checkpoint on disk (the non-finite stop names it). A resumed run in its
  // own folder already has its first checkpoint, and must not rewrite it in place.
  let savedStep = progress.resumedIn === outDir ? progress.startStep : -1;
  let checkpointDir = savedStep === done ? findCheckpoint(outDir) : save();
  await evals?.start(done, state.weights);
  const startMessage = source.startMessage?.(totalSteps - done);
  if (startMessage) emit({ type: 'status', phase: 'training', message: startMessage });
  let status: TrainResult['status'] = 'finished';

  while (done < totalSteps) {
    if (input.shouldStop()) {
      status = 'cancelled';
      break;
    }
    const t0 = Date.now();
    const batch = await source.batch(done, state.weights);
    if (batch === 'stopped') {
      status = 'cancelled';
      break;
    }
    let metrics: BatchMetrics | null = null;
    // GRPO: a group whose rewards are all equal carries no reward signal; under a method that
    // learns from rewards alone (rl) its rows leave the step (./grpo-gae.ts informativeRows). A
    // method that also learns from hints (combine) keeps them for their OPD term.
    const pool = batch.groupPool ?? batch.rows;
    const dropEqual = settings.ppo.advantage === 'grpo' && !methodRecord(settings.method).uses.hint;
    const kept = dropEqual ? informativeRows(batch.rows, pool) : batch.rows;
    const teacher = dropEqual && batch.teacher ? batch.rows.flatMap((row, i) => (kept.includes(row) ? [batch.teacher![i]] : [])) : batch.teacher;
    if (kept.length > 0) {
      const result = await trainBatch({
        step, rows: kept, ...state, random: minibatchRandom(settings.seed, done), groupPool: pool, teacher,
        settings: { method: settings.method, wOpd: settings.wOpd, wRl: settings.wRl, klBeta: settings.loss.klBeta, ppo: settings.ppo, opdTopK: settings.loss.opdTopK ?? 0 },
      });
      checkFiniteBatch(result, { step: done + 1, lr: settings.optimizer.lr, savedStep, checkpointDir });
      metrics = result.metrics;
      state = { weights: result.weights, optimizer: result.optimizer, valueHead: result.valueHead };
    }
    done++;
    const seconds = (Date.now() - t0) / 1000;
    const perStep = (Date.now() - started) / 1000 / (done - progress.startStep);
    last = stepLine(metrics, methodLoss(settings.method), {
      step: done, total_steps: totalSteps, epoch: batch.epoch, lr: settings.optimizer.lr, seconds,
      elapsed_s: progress.elapsedBefore + (Date.now() - started) / 1000, eta_s: perStep * (totalSteps - done), execution_provider: step.executionProvider,
    }, batch.logFields);
    log.append(last);
    emit({ type: 'step', log: last });
    if (settings.saveEvery > 0 && done % settings.saveEvery === 0 && done < totalSteps) checkpointDir = save();
    await evals?.after(done, state.weights);
  }
  await evals?.after(done, state.weights, true); // a cancelled run is measured where it stopped
  if (savedStep !== done) checkpointDir = save();
  emit({ type: 'status', phase: 'exporting', message: `writing the adapter to ${outDir}` });
  writeAdapter(outDir, { lora: settings.lora, specs: step.specs, weights: state.weights, baseModel: settings.modelDir, model: input.checkpoint.config });
  if (state.valueHead) writeValueHead(outDir, state.valueHead);
  // A quantised run merges into the model's own weights too: --quantize changes how the run stored the base, not what the adapter is added to.
  if (settings.merge) emit({ type: 'status', phase: 'exporting', message: `merging into the model's own fp32 weights${settings.quantize === 'none' ? '' : ` (not the ${settings.quantize} copy the run trained on)`}` });
  const mergedDir = settings.merge ? writeMergedModel(input.checkpoint, path.join(outDir, 'merged'), settings.lora, step.specs, state.weights) : undefined;
  const evalFile = evals?.writeReport(outDir) ?? null;
  return {
    status, steps: done, totalSteps, adapterDir: outDir, checkpointDir, logFile: log.file, executionProvider: step.executionProvider,
    ...source.summary, last, mergedDir, heldOut: input.heldOut, lastEval: evals?.last ?? null, evalFile,
  };
}

type StepPosition = Pick<StepLog, 'step' | 'total_steps' | 'epoch' | 'lr' | 'elapsed_s' | 'eta_s' | 'execution_provider'> & { seconds: number };

/**
 * One step's log line: the batch's metrics (zeros for a step that trained nothing), the ones
 * only some runs measure (PPO epochs, rollouts, `gae`) when measured, then the source's fields.
 */
function stepLine(m: BatchMetrics | null, loss: LossSpec, at: StepPosition, sourceFields: Partial<StepLog> | undefined): StepLog {
  return {
    step: at.step, total_steps: at.total_steps, epoch: at.epoch,
    loss: m?.loss ?? 0, reward_mean: m?.rewardMean ?? 0, adv_mean: m?.advMean ?? 0, teacher_student_gap: m?.teacherStudentGap ?? null,
    ...lossMetricFields(loss, m), grad_norm: m?.gradNorm ?? 0, lr: at.lr, tokens: m?.tokens ?? 0,
    tokens_per_s: m && at.seconds > 0 ? m.inputTokens / at.seconds : 0,
    elapsed_s: at.elapsed_s, eta_s: at.eta_s, execution_provider: at.execution_provider,
    ...(m?.drift !== undefined ? { drift: m.drift } : {}),
    ...(m?.valueLoss !== undefined ? { value_loss: m.valueLoss } : {}),
    ...(m?.explainedVariance !== undefined ? { explained_variance: m.explainedVariance } : {}),
    ...(m?.topkKl !== undefined ? { topk_kl: m.topkKl } : {}),
    ...sourceFields,
  };
}

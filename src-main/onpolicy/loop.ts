/**
 * The steps of an on-policy run (see ./onpolicy-trainer.ts for what one step does), with the
 * checkpoints (at the start, every `saveEvery` steps, at the end and on a stop), the
 * held-out evaluations, the non-finite stop, and the PEFT export (plus the value head of a
 * `gae` run). The step counter comes from the checkpoint, so a resumed run never repeats an
 * update; the episodes of the step it was in come from episodes.jsonl (./step-rollouts.ts).
 */
import type { Episode } from '../../src-shared/rollout.js';
import type { Checkpoint } from '../model/hf-checkpoint.js';
import type { ModelEngine } from '../model/inference-engine.js';
import type { EpisodeWriter } from '../rollout/episodes-file.js';
import type { Policy } from '../rollout/policy.js';
import type { ToolRegistry } from '../rollout/tools.js';
import { overLengthNote } from '../../src-shared/training.js';
import { writeMergedModel } from '../train/merge.js';
import { writeAdapter } from '../train/peft.js';
import { minibatchRandom, trainBatch, type BatchMetrics } from '../train/ppo-batch.js';
import { findCheckpoint, saveCheckpoint, type TrainerState } from '../train/run-checkpoint.js';
import type { RunEvaluations } from '../train/run-evaluations.js';
import type { StepLog, TrainerLog } from '../train/trainer-log.js';
import { checkFiniteBatch } from '../train/non-finite.js';
import type { TrainerEvent, TrainResult } from '../train/trainer.js';
import type { LoraWeights, TrainStep } from '../train/training-step.js';
import { writeValueHead } from '../train/value-head.js';
import { contextsForStep, type StepContext } from './contexts.js';
import { savedForm, type OnPolicyTrainSettings } from './options.js';
import type { Prepared } from './prepare.js';
import { stepRow, type Scorer, type StepRow } from './scoring.js';
import { episodesByStep, stepEpisodes } from './step-rollouts.js';

export interface Loop {
  outDir: string;
  prepared: Prepared;
  step: TrainStep;
  engine: ModelEngine;
  policy: Policy;
  tools: ToolRegistry;
  contexts: StepContext[];
  log: TrainerLog;
  emit: (e: TrainerEvent) => void;
  shouldStop: () => boolean;
  evals: RunEvaluations | null;
  writer: EpisodeWriter;
  /** Episodes already in the file from the steps after the checkpoint (a resumed run); an episode's step counts from 0. */
  written: Episode[];
  scorer: Scorer;
  checkpoint: Checkpoint;
}

type LoopResult = Omit<TrainResult, 'heldOut'>;

export async function runSteps(l: Loop): Promise<LoopResult> {
  const p = l.prepared;
  const { settings, totalSteps } = p;
  let state = { weights: p.weights, optimizer: p.optimizer, valueHead: p.valueHead };
  let done = p.startStep;
  let last: StepLog | null = null;
  const started = Date.now();
  const written = episodesByStep(l.written);
  const save = (): string => {
    savedStep = done;
    l.emit({ type: 'status', phase: 'saving', message: `checkpoint at step ${done}` });
    const trainerState: TrainerState<OnPolicyTrainSettings> = {
      format: 1, step: done, totalSteps, settings: savedForm(settings), datasetSha256: p.contextsSha, savedAt: new Date().toISOString(),
    };
    return saveCheckpoint(l.outDir, { state: trainerState, lora: settings.lora, specs: l.step.specs, ...state, baseModel: settings.modelDir });
  };
  // A resumed run in its own folder already has its checkpoint (never rewritten in place).
  let savedStep = p.resumedIn === l.outDir ? p.startStep : -1;
  let checkpointDir = savedStep === done ? findCheckpoint(l.outDir) : save();
  await l.evals?.start(done, state.weights);
  let status: TrainResult['status'] = 'finished';

  while (done < totalSteps) {
    if (l.shouldStop()) {
      status = 'cancelled';
      break;
    }
    const t0 = Date.now();
    const { contexts, epoch } = contextsForStep(l.contexts, settings.onPolicy.contextsPerStep, settings.seed, done);
    l.engine.setLora(state.weights);
    l.emit({ type: 'status', phase: 'generating', message: `step ${done + 1}: ${settings.onPolicy.rollouts} rollouts of ${contexts.length} context(s)` });
    const episodes = await stepEpisodes({
      policy: l.policy, tools: l.tools, settings: settings.onPolicy, seed: settings.seed, scorer: l.scorer, writer: l.writer,
      written: written.get(done) ?? new Map(), shouldStop: l.shouldStop,
    }, contexts, done);
    if (episodes === 'stopped') {
      status = 'cancelled';
      break;
    }
    const { rows, over } = stepRows(episodes, contexts, settings);
    const overNote = over ? `; ${overLengthNote(over, settings.maxLength).replace(/samples?/, over === 1 ? 'episode' : 'episodes')}` : '';
    l.emit({ type: 'status', phase: 'training', message: `step ${done + 1}: training on ${rows.length} of ${episodes.length} episodes${overNote}` });
    const metrics = rows.length ? await update(l, settings, rows, state, done, { savedStep, checkpointDir }) : null;
    if (metrics) state = metrics.state;
    done++;
    const seconds = (Date.now() - t0) / 1000;
    const perStep = (Date.now() - started) / 1000 / (done - p.startStep);
    last = stepLine(metrics?.metrics ?? null, episodes, {
      step: done, total_steps: totalSteps, epoch, lr: settings.optimizer.lr, seconds, elapsed_s: p.elapsedBefore + (Date.now() - started) / 1000,
      eta_s: perStep * (totalSteps - done), execution_provider: l.step.executionProvider,
    }, over);
    l.log.append(last);
    l.emit({ type: 'step', log: last });
    if (settings.saveEvery > 0 && done % settings.saveEvery === 0 && done < totalSteps) checkpointDir = save();
    await l.evals?.after(done, state.weights);
  }
  await l.evals?.after(done, state.weights, true);
  if (savedStep !== done) checkpointDir = save();
  l.emit({ type: 'status', phase: 'exporting', message: `writing the adapter to ${l.outDir}` });
  writeAdapter(l.outDir, { lora: settings.lora, specs: l.step.specs, weights: state.weights, baseModel: settings.modelDir });
  if (state.valueHead) writeValueHead(l.outDir, state.valueHead);
  const mergedDir = settings.merge ? writeMergedModel(l.checkpoint, `${l.outDir}/merged`, settings.lora, l.step.specs, state.weights) : undefined;
  return {
    status, steps: done, totalSteps, adapterDir: l.outDir, checkpointDir, logFile: l.log.file, executionProvider: l.step.executionProvider,
    rows: l.contexts.length, skipped: p.skipped, truncated: 0, last, mergedDir, lastEval: l.evals?.last ?? null, evalFile: l.evals?.writeReport(l.outDir) ?? null,
  };
}

/** The step's training rows, and how many episodes were skipped for not fitting the run's length. */
function stepRows(episodes: readonly Episode[], contexts: readonly StepContext[], settings: OnPolicyTrainSettings): { rows: StepRow[]; over: number } {
  const byId = new Map(contexts.map((c) => [c.id, c]));
  const rows: StepRow[] = [];
  let over = 0;
  for (const e of episodes) {
    const r = stepRow(e, byId.get(e.contextId)!, settings.method, settings.maxLength);
    if (r === 'over') over++;
    else if (r) rows.push(r);
  }
  return { rows, over };
}

type State = { weights: LoraWeights; optimizer: Prepared['optimizer']; valueHead?: Prepared['valueHead'] };

/** The step's PPO updates on its rows; a non-finite result stops the run, naming the step and the checkpoint on disk. */
async function update(l: Loop, settings: OnPolicyTrainSettings, rows: StepRow[], state: State, done: number, saved: { savedStep: number; checkpointDir: string }) {
  const result = await trainBatch({
    step: l.step, rows: rows.map((r) => r.row), ...state, random: minibatchRandom(settings.seed, done), groupPool: rows.map((r) => r.row),
    teacher: settings.method === 'rl' ? undefined : rows.map((r) => r.teacher),
    settings: { method: settings.method, wOpd: settings.wOpd, wRl: settings.wRl, klBeta: settings.loss.klBeta, ppo: settings.ppo },
  });
  checkFiniteBatch(result, { step: done + 1, lr: settings.optimizer.lr, ...saved });
  return { metrics: result.metrics, state: { weights: result.weights, optimizer: result.optimizer, valueHead: result.valueHead } };
}

/** One step's log line: the batch's metrics (zeros for a step with nothing to train), its episodes and their mean reward. */
function stepLine(
  m: BatchMetrics | null, episodes: readonly Episode[],
  base: Pick<StepLog, 'step' | 'total_steps' | 'epoch' | 'lr' | 'elapsed_s' | 'eta_s' | 'execution_provider'> & { seconds: number },
  overLength: number,
): StepLog {
  const rewarded = episodes.filter((e) => e.reward !== null);
  const { seconds, ...rest } = base;
  return {
    ...rest, loss: m?.loss ?? 0, reward_mean: m?.rewardMean ?? 0, adv_mean: m?.advMean ?? 0, teacher_student_gap: m?.teacherStudentGap ?? null,
    approx_kl: m?.approxKl ?? 0, clipfrac: m?.clipfrac ?? 0, grad_norm: m?.gradNorm ?? 0, tokens: m?.tokens ?? 0,
    tokens_per_s: m && seconds > 0 ? m.inputTokens / seconds : 0,
    ...(m?.drift !== undefined ? { drift: m.drift } : {}),
    ...(m?.valueLoss !== undefined ? { value_loss: m.valueLoss } : {}),
    ...(m?.explainedVariance !== undefined ? { explained_variance: m.explainedVariance } : {}),
    episodes: episodes.length,
    ...(overLength ? { skipped_over_length: overLength } : {}),
    episode_reward_mean: rewarded.length ? rewarded.reduce((s, e) => s + e.reward!, 0) / rewarded.length : null,
  };
}

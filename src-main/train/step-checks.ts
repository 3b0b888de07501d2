/**
 * The training step's own checks of its settings (./step-engine.ts calls them before it builds a
 * graph): each number within training's bounds (src-shared/training.ts TRAIN_BOUNDS), said in
 * the step's words, so a step built directly (tests, benches) refuses what the CLI would.
 */
import { boundProblem, LOSS_AGGS, TRAIN_BOUNDS, type BoundedOption } from '../../src-shared/training.js';
import { UserError } from '../../src-shared/types.js';
import type { ValueHeadConfig } from './step-loss.js';
import type { LoraConfig, LossConfig, OptimizerConfig } from './training-step.js';

/** What of a step's options is checked (./step-engine.ts TrainStepOptions has these). */
export interface CheckedOptions {
  lora: LoraConfig;
  loss: LossConfig;
  optimizer: OptimizerConfig;
  vocabChunk?: number;
  value?: ValueHeadConfig;
  microBatch?: number;
}

/** The step's settings within training's bounds (src-shared/training.ts TRAIN_BOUNDS, the CLI's and the run's), said in the step's own words. */
export function checkOptions(o: CheckedOptions): void {
  const within = (option: BoundedOption, value: number) => {
    const problem = boundProblem(option, value);
    if (problem) throw new UserError(`${TRAIN_BOUNDS[option].label} ${problem}`);
  };
  within('loraR', o.lora.r);
  within('loraAlpha', o.lora.alpha);
  if (o.lora.targets.length === 0) throw new UserError('LoRA needs at least one target');
  within('lr', o.optimizer.lr);
  within('maxGradNorm', o.optimizer.maxGradNorm);
  within('epsLow', o.loss.epsLow);
  within('epsHigh', o.loss.epsHigh);
  if (o.vocabChunk !== undefined && !(Number.isInteger(o.vocabChunk) && o.vocabChunk >= 0)) throw new UserError(`vocabulary chunk must be a whole number ≥ 0, got ${o.vocabChunk}`);
  within('klBeta', o.loss.klBeta);
  if (o.loss.opdTopK !== undefined) within('opdTopK', o.loss.opdTopK);
  if (o.loss.lossAgg !== undefined && !LOSS_AGGS.includes(o.loss.lossAgg)) throw new UserError(`loss aggregation must be ${LOSS_AGGS.join(' or ')}, got ${JSON.stringify(o.loss.lossAgg)}`);
  if (o.microBatch !== undefined) within('microBatch', o.microBatch);
  if (o.value) {
    within('valueClip', o.value.clip);
    within('valueCoef', o.value.coef);
  }
}

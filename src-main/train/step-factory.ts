/**
 * Builds the compiled training step (src-main/train/step/, the autodiff side of the seam in
 * ./step-api.ts) for the trainer.
 */
import { UserError } from '../core/types.js';
import type { StepFactory } from './trainer.js';
import type { TrainStep } from './step-api.js';

export const createStepForTrainer: StepFactory = async (args) => {
  // Resolved at run time until the step module lands in this tree.
  const modulePath = './step/index.js';
  let mod: { createTrainStep?: (...a: unknown[]) => Promise<TrainStep> };
  try {
    mod = await import(/* @vite-ignore */ modulePath);
  } catch {
    throw new UserError('the training step (src-main/train/step/) is not available in this build');
  }
  if (!mod.createTrainStep) throw new UserError('the training step module has no createTrainStep');
  return mod.createTrainStep(args);
};

/**
 * Builds the compiled training step (src-main/train/step/, the autodiff side of the seam in
 * ./step-api.ts) for the trainer. The trainer already runs in a worker thread, so it takes
 * the in-process step rather than a second worker hop (same interface, same results).
 */
import { createTrainStepInProcess } from './step/index.js';
import type { StepFactory } from './trainer.js';

export const createStepForTrainer: StepFactory = (args) =>
  createTrainStepInProcess(args.checkpoint, {
    lora: args.lora, loss: args.loss, optimizer: args.optimizer, device: args.device, threads: args.threads,
  });

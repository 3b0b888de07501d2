/**
 * The held-out evaluations of one run (docs/design.md §Evaluation): when to measure, and where
 * each measurement goes (a `"type":"eval"` line of the log, an `eval` event, `eval.json` at the
 * end). The run loop (./run-loop.ts) keeps one for every run, offline or on-policy.
 */
import { readEvalLog, type EvalLogLine, type TrainerLog } from './trainer-log.js';
import { evaluatesAt, type RunEvaluator } from './train-eval.js';
import type { TrainerEvent } from './run-events.js';
import type { LoraWeights, TrainStep } from './training-step.js';

/** The evaluations of one run: when to measure, and where each measurement goes. */
export class RunEvaluations {
  last: EvalLogLine | null = null;

  constructor(
    private readonly evaluator: RunEvaluator, private readonly step: TrainStep, private readonly log: TrainerLog,
    private readonly emit: (e: TrainerEvent) => void, private readonly totalSteps: number, private readonly every: number,
  ) {}

  /** The base and teacher once, then the adapter at the start unless the resumed log has it. */
  async start(done: number, weights: LoraWeights): Promise<void> {
    this.emit({ type: 'status', phase: 'evaluating', message: `measuring ${this.evaluator.split.samples} held-out samples under the base model` });
    await this.evaluator.begin(this.step);
    this.last = readEvalLog(this.log.file).find((l) => l.step === done) ?? null;
    if (!this.last) await this.measure(done, weights);
  }

  async after(done: number, weights: LoraWeights, force = false): Promise<void> {
    if (this.last?.step === done || !(force || evaluatesAt(done, this.totalSteps, this.every))) return;
    await this.measure(done, weights);
  }

  private async measure(done: number, weights: LoraWeights): Promise<void> {
    this.emit({ type: 'status', phase: 'evaluating', message: `evaluating the held-out samples at step ${done}` });
    this.last = await this.evaluator.measure(this.step, weights, done, this.totalSteps);
    this.log.append(this.last);
    this.emit({ type: 'eval', log: this.last });
  }

  writeReport(outDir: string): string | null {
    return this.evaluator.writeReport(outDir);
  }
}

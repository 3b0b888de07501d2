/**
 * Evaluation during a run (docs/design.md §Evaluation): the held-out samples the caller hands
 * the trainer (TrainerOptions.heldOut) are measured with the run's own forward pass at the
 * start, every `evalEvery` steps and at the end; each measurement is a `"type":"eval"` line of
 * trainer_log.jsonl, and the last one is written as `eval.json` in the adapter folder, in the
 * shape of `hindsight eval --json`.
 *
 * The base model (adapter off) is measured once, at the start; each evaluation then measures
 * the adapter as it is at that step and compares it with the base, paired over the samples.
 * The teacher of the hint gap is the base on the hint-enhanced context, also measured once.
 */
import fs from 'node:fs';
import path from 'node:path';
import { BASE_MODEL_NAME, gapDelta, hintMetrics, likelihoodMetrics, marginDelta, type EvalReport, type SampleScore } from '../../src-shared/eval-report.js';
import type { EvalLogLine } from '../../src-shared/trainer-log-line.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { UserError } from '../../src-shared/types.js';
import type { ChatTokenizer } from '../model/tokenizer.js';
import { writeJsonAtomic } from './files.js';
import { evalRowsFromSamples, sampleScores, scoreInBatches, teacherLogprobs, type EvalRow, type SpanScorer } from './eval-rows.js';
import type { TrainRow } from './batches.js';
import type { LoraWeights, TrainStep } from './training-step.js';

export const EVAL_FILE = 'eval.json';

/** What the caller knows of the held-out split: the sessions (never trained on) and their samples. */
export interface HeldOutSet {
  sessionIds: string[];
  samples: TrainingSample[];
}

/** About ten evaluations over a run of `totalSteps`, plus the start and the end. */
export function defaultEvalEvery(totalSteps: number): number {
  return Math.max(1, Math.ceil(totalSteps / 10));
}

/** Whether the run evaluates after step `done` (the start and the end are always evaluated). */
export function evaluatesAt(done: number, totalSteps: number, every: number): boolean {
  return done === totalSteps || (every > 0 && done % every === 0);
}

/** Refuses any row from a held-out session: held-out samples are for evaluation only. */
export function assertNoHeldOutRows(rows: readonly Pick<TrainRow, 'sessionId' | 'origin'>[], heldOut: ReadonlySet<string>): void {
  const leaked = rows.find((r) => r.sessionId !== undefined && heldOut.has(r.sessionId));
  if (leaked) {
    throw new UserError(`refusing to train on ${leaked.origin}: session ${leaked.sessionId} is held out for evaluation (move it to training first, or leave it out)`);
  }
}

export class RunEvaluator {
  private base: SampleScore[] = [];
  private teacher: (Float32Array | undefined)[] = [];
  private last: { step: number; scores: SampleScore[] } | null = null;

  private constructor(
    private readonly rows: EvalRow[],
    readonly split: { sessions: number; samples: number },
    private readonly seed: number,
    private readonly batchSize: number,
  ) {}

  /** The evaluator of a run, or null when the held-out samples give nothing to measure. */
  static create(heldOut: HeldOutSet, tokenizer: ChatTokenizer, options: { maxLength: number; seed: number; batchSize: number }): RunEvaluator | null {
    const { rows } = evalRowsFromSamples(heldOut.samples, tokenizer, options.maxLength);
    if (rows.length === 0) return null;
    const sessions = new Set(heldOut.samples.map((s) => s.sessionId)).size;
    return new RunEvaluator(rows, { sessions, samples: heldOut.samples.length }, options.seed, options.batchSize);
  }

  /** Measures the base model and the teacher: once, before the first evaluation. */
  async begin(step: TrainStep): Promise<void> {
    const base: SpanScorer = (spans) => scoreInBatches(spans, this.batchSize, (b) => step.baseLogprobs(b));
    this.teacher = await teacherLogprobs(this.rows, base);
    this.base = await sampleScores(this.rows, base, this.teacher);
  }

  /** Measures the adapter at step `done` against the base. */
  async measure(step: TrainStep, weights: LoraWeights, done: number, totalSteps: number): Promise<EvalLogLine> {
    const started = Date.now();
    const policy: SpanScorer = (spans) => scoreInBatches(spans, this.batchSize, (b) => step.policyLogprobs(b, weights));
    const scores = await sampleScores(this.rows, policy, this.teacher);
    this.last = { step: done, scores };
    return {
      type: 'eval', step: done, total_steps: totalSteps, split: this.split,
      likelihood: likelihoodMetrics(scores, this.seed), hints: hintMetrics(scores, this.seed),
      margin_delta: marginDelta(scores, this.base, this.seed), gap_delta: gapDelta(scores, this.base, this.seed),
      seconds: (Date.now() - started) / 1000,
    };
  }

  /** The last evaluation as `hindsight eval --json` would print it for this adapter, written to <out>/eval.json. */
  writeReport(outDir: string): string | null {
    if (!this.last) return null;
    const name = path.basename(outDir);
    const report: EvalReport & { step: number } = {
      split: { name: 'heldout', ...this.split },
      seed: this.seed,
      metrics: ['likelihood', 'hints'],
      models: [
        { name: BASE_MODEL_NAME, likelihood: likelihoodMetrics(this.base, this.seed), hints: hintMetrics(this.base, this.seed) },
        { name, adapter: outDir, likelihood: likelihoodMetrics(this.last.scores, this.seed), hints: hintMetrics(this.last.scores, this.seed) },
      ],
      comparisons: [{ a: name, b: BASE_MODEL_NAME, margin_delta: marginDelta(this.last.scores, this.base, this.seed), gap_delta: gapDelta(this.last.scores, this.base, this.seed) }],
      notes: [],
      cancelled: false,
      step: this.last.step,
    };
    const file = path.join(outDir, EVAL_FILE);
    fs.mkdirSync(outDir, { recursive: true });
    writeJsonAtomic(file, report);
    return file;
  }
}

/**
 * The app's evaluation calls (docs/design.md §Evaluation): their input validators and the
 * state the Evaluate page reads. Node-free (the contract and the renderer import it).
 */
import type { EvalMetric, EvalReport } from './eval-report.js';
import { EVAL_METRICS } from './eval-report.js';
import { array, boolean, integer, object, oneOf, optional, string } from './validate.js';

export const evalStartInput = object({
  modelDir: string({ min: 1, max: 4096 }),
  adapters: array(string({ min: 1, max: 4096 }), { max: 8 }),
  metrics: array(oneOf(EVAL_METRICS), { min: 1, max: 4 }),
  rollouts: optional(integer({ min: 1, max: 16 })),
  maxNewTokens: optional(integer({ min: 1, max: 2048 })),
  /** Also measure the base model told the database's lessons (docs/design.md §Lessons); default: when it has some. */
  lessons: optional(boolean()),
});

export interface EvalProgressView {
  model: string;
  done: number;
  total: number;
  message: string;
}

/** The running or last evaluation of this launch. */
export interface EvalState {
  state: 'idle' | 'running' | 'done' | 'cancelled' | 'failed';
  progress: EvalProgressView | null;
  report: EvalReport | null;
  error: string | null;
  metrics: EvalMetric[];
}

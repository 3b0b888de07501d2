// The token view of a reply (docs/design.md §Token view): what the API gives the annotator to
// colour a reply token by token. Node-free: the browser bundle imports it through contract.ts.
import { integer, object, oneOf, optional, string } from './validate.js';

/**
 * - hint:    teacher − student, the OPD advantage: the same model scores the reply after the
 *            hint-enhanced context (teacher) and after the plain context (student).
 * - adapter: the change a trained adapter makes: base + adapter − base, on the plain context.
 */
export type TokenViewMode = 'hint' | 'adapter';
export const TOKEN_VIEW_MODES: readonly TokenViewMode[] = ['hint', 'adapter'];

export interface TokenViewToken {
  id: number;
  /** The token's text in the reply (the decoded difference it adds). */
  text: string;
  /** The reference log-prob: the student's (hint) or the base model's (adapter). */
  from: number;
  /** The compared log-prob: the teacher's (hint) or the adapted model's (adapter). */
  to: number;
  /** to − from as the trainer computes it (fp32): for the hint, the token's OPD advantage. */
  value: number;
}

export interface TokenView {
  mode: TokenViewMode;
  sessionId: string;
  responseTurn: number;
  modelDir: string;
  adapterDir: string | null;
  /** The hint the teacher saw (the one training uses); null in adapter mode. */
  hint: string | null;
  tokens: TokenViewToken[];
  /** Token mean of value: for the hint, the trainer's teacher–student gap for this reply alone. */
  mean: number;
  /** The reply was longer than the trainer's max length and is cut as training cuts it. */
  truncated: boolean;
  /** Served from the cache (same model, adapter, context, hint and reply tokens). */
  cached: boolean;
  executionProvider: string;
}

/** `tokenView` answers a view, or that it was cancelled (by cancel({ job: 'tokenView' }) or a newer request). */
export type TokenViewResult = { cancelled: false; view: TokenView } | { cancelled: true; view: null };

export const tokenViewInput = object({
  sessionId: string({ min: 1, max: 500 }),
  responseTurn: integer({ min: 0 }),
  mode: oneOf(TOKEN_VIEW_MODES),
  /** Default: the default model folder of the settings (the Training page's). */
  modelDir: optional(string({ min: 1, max: 4096 })),
  /** Adapter mode: a trained adapter's folder (a training run's output). */
  adapterDir: optional(string({ min: 1, max: 4096 })),
});

/** The `tokenview.progress` event: where a token view computation is. */
export interface TokenViewProgress {
  sessionId: string;
  responseTurn: number;
  mode: TokenViewMode;
  step: number;
  steps: number;
  message: string;
}

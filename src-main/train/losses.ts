/**
 * The loss registry: every policy loss the training graph can end in, by name, the way
 * ../graph/op-table.ts holds the ops. A loss record is its words (src-shared/training-methods.ts
 * LossSpec: the metrics it declares, with their log fields and charts) plus what the graph
 * needs: the values it reads and a builder that appends its part of the graph. A method's record
 * names its loss; ./step-graph.ts builds the method's loss from here, and ./step-engine.ts
 * fetches the metrics it declares, so trainer_log.jsonl and the charts follow the declaration.
 *
 * What every loss is handed (./step-graph.ts prepares it; docs/design.md §Losses), float32 [N]
 * at the picked tokens:
 *   logprobs    the policy's log-probs (with gradient)
 *   mask        the response mask (1 on trained tokens)
 *   old         the old log-probs, in-step old applied (./step-loss.ts appendInStepOld)
 *   advantages  the advantages, the OPD term w_opd·(teacher − old) included
 *   ref         the base model's log-probs, for a KL penalty; only when the loss lists it and klBeta > 0
 * and `mean`, the run's mean of a per-token value over the trained tokens (--loss-agg:
 * token-mean or sample-mean; ./step-loss.ts aggregator), which a loss uses for every average
 * so that the option applies to it.
 *
 * Its builder returns the loss (a scalar the gradients are taken of), Σ mask as `tokens`, and
 * one scalar per declared metric by its key. Built-ins below; `registerLoss` adds one at run
 * time (test/train/method-table.test.ts adds REINFORCE that way).
 */
import { UserError } from '../../src-shared/types.js';
import { BUILT_IN_LOSSES, registerLossSpec, type BuiltInLoss, type LossSpec } from '../../src-shared/training-methods.js';
import type { GraphBuilder } from '../graph/ir.js';
import { appendPolicyLoss, type Aggregate } from './step-loss.js';
import type { LossConfig } from './training-step.js';

/** The values a loss may read; `inputs` of a record names those it does. */
export interface LossGraphValues {
  logprobs: string;
  mask: string;
  old: string;
  advantages: string;
  /** Present only when the record lists `ref` and the run's klBeta > 0. */
  ref?: string;
  /** The run's mean over the trained tokens (--loss-agg); not an input to list. */
  mean: Aggregate;
}
export type LossInput = Exclude<keyof LossGraphValues, 'mean'>;

export interface LossGraphOutputs {
  loss: string;
  /** Σ mask. */
  tokens: string;
  /** One scalar per metric the loss declares, by its key. */
  metrics: Record<string, string>;
}

export interface LossRecord extends LossSpec {
  readonly inputs: readonly LossInput[];
  build(b: GraphBuilder, x: LossGraphValues, cfg: LossConfig): LossGraphOutputs;
}

/** The graphs of the built-in losses (their words: src-shared/training-methods.ts BUILT_IN_LOSSES). */
const BUILT_IN_GRAPHS: { [name in BuiltInLoss]: LossRecord } = {
  'ppo-clip': {
    ...BUILT_IN_LOSSES['ppo-clip'],
    inputs: ['logprobs', 'mask', 'old', 'advantages', 'ref'],
    build(b, x, cfg) {
      const v = appendPolicyLoss(b, x, cfg);
      return { loss: v.loss, tokens: v.tokens, metrics: { approxKl: v.approxKl, clipfrac: v.clipfrac } };
    },
  },
};

const registry = new Map<string, LossRecord>(Object.values(BUILT_IN_GRAPHS).map((r) => [r.name, r]));

/**
 * Step-metric keys and graph-output / log-field names a step has whatever its loss: a declared
 * metric may not take one, or it would overwrite it in the step's metrics, outputs or log line.
 */
const TAKEN = new Set(['loss', 'gradNorm', 'tokens', 'valueLoss', 'updates', 'grad_norm', 'logprobs', 'values', 'value_loss', 'step', 'lr']);

/** Adds a loss: its words join the shared table (so logs and the CLI know its metrics), its graph this one. */
export function registerLoss(record: LossRecord): void {
  if (registry.has(record.name)) throw new Error(`loss '${record.name}' is defined twice`);
  const clash = record.metrics.flatMap((m) => [m.key, m.field]).find((name) => TAKEN.has(name));
  if (clash) throw new Error(`loss '${record.name}': its metric name '${clash}' is one every step already has`);
  registerLossSpec(record);
  registry.set(record.name, record);
}

export function lossRecord(name: string): LossRecord {
  const record = registry.get(name);
  if (!record) throw new Error(`no graph for loss '${name}' (known: ${[...registry.keys()].join(', ')}): register it (./losses.ts registerLoss)`);
  return record;
}

/** A loss's settings checked against what its record reads: a KL penalty needs a loss that takes `ref`. */
export function checkLossConfig(record: LossRecord, cfg: LossConfig): void {
  if (cfg.klBeta > 0 && !record.inputs.includes('ref')) throw new UserError(`the ${record.name} loss has no KL penalty: leave --kl-beta at 0`);
}

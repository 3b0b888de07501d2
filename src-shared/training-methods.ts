/**
 * The training methods and the words of their losses, one record each (docs/design.md
 * §Methods and losses). Everything that differs between methods is a field here: which signals
 * a method learns from (`uses.reward`, `uses.hint`), whether combine's weights apply, its
 * defaults, its loss. The CLI's --method, the API contract, the Training and Capture pages, the
 * trainer, the on-policy loop and live capture all read these records instead of comparing
 * method names, so a method is added by adding a record (and a loss by adding a loss record:
 * its words here, its graph in src-main/train/losses.ts). Node-free: the browser bundle loads it.
 *
 * Built-in methods are the static table below; `registerMethod` adds one at run time (tests
 * add a method without touching any other file; test/train/method-table.test.ts).
 */

/** Which signals of a sample a method learns from: the ±1 reward, the hint (the OPD teacher), or both; never neither. */
export type MethodSignals = { readonly reward: true; readonly hint: boolean } | { readonly reward: false; readonly hint: true };

export interface MethodRecord {
  /** What --method, the API and a saved run call it. */
  readonly name: string;
  /** The Training page's name, which errors said in the app's words use too. */
  readonly label: string;
  /** One line beside it on the Training page. */
  readonly help: string;
  readonly uses: MethodSignals;
  /**
   * Whether the advantage weighs its two terms by --w-opd and --w-rl (w_opd·gap + w_rl·r);
   * otherwise each term it uses has weight 1.
   */
  readonly weighted: boolean;
  /** What the method starts from unless given: PPO-clip's upper ε. */
  readonly defaults: { readonly epsHigh: number };
  /** The loss the training step builds (a {@link LossSpec}'s name; its graph in src-main/train/losses.ts). */
  readonly loss: string;
}

/** One metric a loss reports besides the loss itself: a graph output, a step metric, a trainer_log.jsonl field and a chart. */
export interface LossMetric {
  /** The name in StepMetrics / BatchMetrics (src-main/train/training-step.ts): `approxKl`. */
  readonly key: string;
  /** The training graph's output and the trainer_log.jsonl field: `approx_kl`. */
  readonly field: string;
  /** The chart on the Training page: its key (`data-chart`), title and help. */
  readonly chart: string;
  readonly title: string;
  readonly help: string;
  /** The chart's note when the metric was 0 at every step, if that is worth explaining. */
  readonly allZeroNote?: string;
  /** The metric in the CLI's progress line: `kl 1.20e-3`. */
  readonly show: (value: number) => string;
}

/** The words of a loss: what the app says of it and the metrics it declares, in the order trainer_log.jsonl writes them. */
export interface LossSpec {
  readonly name: string;
  /** The Loss chart's help. */
  readonly help: string;
  readonly metrics: readonly LossMetric[];
}

const ONE_UPDATE =
  'It measures how far the updates moved the policy from the one that generated (or scored) the batch. Offline with one PPO epoch ' +
  'that is the policy taking the step, so 0 is expected; with several epochs, minibatches or on-policy rollouts it grows as the ' +
  'later updates move away from the rollouts, and the clip bounds it.';
const NEVER_CLIPPED = "0 at every step: the updates never moved a token's ratio past the clip (always so with one update per batch on the policy that scored it).";
const NEVER_MOVED = '0 at every step: each update was the first on its batch, so the policy had not yet moved from the one that scored it (always so with one update per batch).';

/** The built-in losses' words (their graphs: src-main/train/losses.ts). */
export const BUILT_IN_LOSSES = {
  'ppo-clip': {
    name: 'ppo-clip',
    help: 'PPO-clip loss, token mean over the batch (lower is better).',
    metrics: [
      {
        key: 'approxKl', field: 'approx_kl', chart: 'kl', title: 'Approx. KL', help: `k3 KL of the updated policy against the old one. ${ONE_UPDATE}`,
        allZeroNote: NEVER_MOVED, show: (v: number) => `kl ${v.toExponential(2)}`,
      },
      {
        key: 'clipfrac', field: 'clipfrac', chart: 'clip', title: 'Clip fraction', help: `Share of tokens whose ratio was clipped. ${ONE_UPDATE}`,
        allZeroNote: NEVER_CLIPPED, show: (v: number) => `clip ${v.toFixed(3)}`,
      },
    ],
  },
} as const satisfies Record<string, LossSpec>;

export type BuiltInLoss = keyof typeof BUILT_IN_LOSSES;
/** The trainer_log.jsonl fields of the built-in losses' metrics (src-shared/trainer-log-line.ts StepLog). */
export type BuiltInMetricField = (typeof BUILT_IN_LOSSES)[BuiltInLoss]['metrics'][number]['field'];

/** The built-in methods, in the order the CLI and the pages list them. */
export const BUILT_IN_METHODS = {
  rl: {
    name: 'rl', label: 'Binary RL', help: 'PPO-clip on the +1/−1 rewards.',
    uses: { reward: true, hint: false }, weighted: false, defaults: { epsHigh: 0.28 }, loss: 'ppo-clip',
  },
  opd: {
    name: 'opd', label: 'On-policy distillation', help: 'The model shown the hint teaches itself, token by token.',
    // ε_high is 0.28 (a higher upper clip) where rewards drive the update; pure distillation keeps the symmetric 0.2.
    uses: { reward: false, hint: true }, weighted: false, defaults: { epsHigh: 0.2 }, loss: 'ppo-clip',
  },
  combine: {
    name: 'combine', label: 'Combined', help: 'Both: hints where there are hints, rewards where there are rewards.',
    uses: { reward: true, hint: true }, weighted: true, defaults: { epsHigh: 0.28 }, loss: 'ppo-clip',
  },
} as const satisfies { [name: string]: MethodRecord & { loss: BuiltInLoss } };

export type BuiltInMethod = keyof typeof BUILT_IN_METHODS;

declare const registered: unique symbol;
/** A method added at run time by {@link registerMethod}: its name, typed so it can stand where a built-in's does. */
export type RegisteredMethod = string & { readonly [registered]: true };
export type TrainMethod = BuiltInMethod | RegisteredMethod;

/** A table keyed by name, each record named as its key (a copy-pasted record that kept its old name fails at load). */
function byName<R extends { readonly name: string }>(table: Record<string, R>, what: string): Map<string, R> {
  for (const [key, record] of Object.entries(table)) if (record.name !== key) throw new Error(`${what} '${key}' is named '${record.name}'`);
  return new Map(Object.entries(table));
}

const methods = byName<MethodRecord>(BUILT_IN_METHODS, 'training method');
const losses = byName<LossSpec>(BUILT_IN_LOSSES, 'loss');

/**
 * Every method --method, the API contract and the pages accept: the built-ins, then any
 * registered in this process. Live: {@link registerMethod} appends to it.
 */
export const TRAIN_METHODS: readonly TrainMethod[] = Object.keys(BUILT_IN_METHODS) as BuiltInMethod[];

export function methodRecord(method: TrainMethod): MethodRecord {
  const record = methods.get(method);
  if (!record) throw new Error(`unknown training method '${method}' (known: ${TRAIN_METHODS.join(', ')})`);
  return record;
}

export function lossSpec(name: string): LossSpec {
  const spec = losses.get(name);
  if (!spec) throw new Error(`unknown loss '${name}' (known: ${[...losses.keys()].join(', ')})`);
  return spec;
}

/** The metrics of every loss known to this process, each field once, built-ins first. */
export function knownLossMetrics(): LossMetric[] {
  const byField = new Map<string, LossMetric>();
  for (const spec of losses.values()) for (const m of spec.metrics) if (!byField.has(m.field)) byField.set(m.field, m);
  return [...byField.values()];
}

/** The words of the loss a method trains with. */
export const methodLoss = (method: TrainMethod): LossSpec => lossSpec(methodRecord(method).loss);

/**
 * Adds a method to this process's table (its loss must be registered, or be a built-in, by the
 * time a run builds its step). Returns its name as a {@link TrainMethod}.
 */
export function registerMethod(record: MethodRecord): RegisteredMethod {
  if (methods.has(record.name)) throw new Error(`training method '${record.name}' is defined twice`);
  methods.set(record.name, record);
  (TRAIN_METHODS as TrainMethod[]).push(record.name as RegisteredMethod);
  return record.name as RegisteredMethod;
}

/** Adds a loss's words (src-main/train/losses.ts registerLoss calls it with the rest of the record). */
export function registerLossSpec(spec: LossSpec): void {
  if (losses.has(spec.name)) throw new Error(`loss '${spec.name}' is defined twice`);
  losses.set(spec.name, spec);
}

// ── what the records say, in words every place shares ──────────────────────────────────

/** The three combinations of signals a method can use. */
export type SignalKind = 'reward' | 'hint' | 'both';
export const signalKind = (method: TrainMethod): SignalKind => {
  const { uses } = methodRecord(method);
  return uses.reward && uses.hint ? 'both' : uses.reward ? 'reward' : 'hint';
};

/** Why a row or sample gives a method nothing to learn from, as a run's `skipped` counts name it. */
export const MISSING_SIGNAL: Record<SignalKind, string> = { reward: 'no ±1 reward', hint: 'no hint', both: 'neither ±1 reward nor hint' };

/** The methods that learn from this signal, in table order. */
export function methodsUsing(signal: keyof MethodSignals): MethodRecord[] {
  return TRAIN_METHODS.map(methodRecord).filter((m) => m.uses[signal]);
}

/** "a", "a or b", "a, b or c". */
export function orList(words: readonly string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/**
 * The weights of the advantage's two terms, w_opd·(teacher − old) + w_rl·r, for a method: its
 * own weights when it is weighted (combine), 1 otherwise; a term the method does not use is
 * left out by its caller (`uses`), not weighted 0, so the sums stay what they were.
 */
export function termWeights(method: TrainMethod, weights: { wOpd: number; wRl: number }): { wOpd: number; wRl: number } {
  return methodRecord(method).weighted ? { wOpd: weights.wOpd, wRl: weights.wRl } : { wOpd: 1, wRl: 1 };
}

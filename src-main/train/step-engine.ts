/**
 * The in-thread training step: ONNX Runtime sessions for the forward and training graphs
 * (./step-graph.ts) of one model + LoRA + loss + optimizer configuration, built through
 * `createTrainStep` (below; its types are in ./training-step.ts). ONNX Runtime blocks the thread that calls it, so
 * the app and the CLI run it in the trainer's worker thread (./trainer-thread.ts).
 *
 * Where the optimizer runs. The Node binding copies every input and output through host
 * memory, so the in-graph update (./step-optimizer.ts `appendUpdate`, every trained tensor
 * joined into one vector) pays for sending the AdamW moments in and the new weights and moments
 * out, while the host update pays a single-threaded JS loop over the LoRA weights. Both are
 * implemented (`placement`); `npm run bench:step-placement -- --steps 10` on the CPU EP of a
 * 2-core VM (load 0.3–1.7; the placements alternate step by step), AdamW, LoRA r=16 on all seven
 * targets, batch 4 × 128, min / median of each of five runs, 2026-11-27:
 *
 *   random Llama 24M (hidden 512, 8 layers), 1.20 M LoRA params, 10 steps per run
 *     host   486/532  555/605  543/619  439/504  511/618 ms
 *     graph  440/507  507/580  536/578  424/483  529/588 ms
 *   stories260K, 0.09 M LoRA params, 40 steps per run
 *     host    31/47    48/68    51/67    31/45    46/59 ms
 *     graph   33/45    53/67    49/67    31/43    43/57 ms
 *   the AdamW update alone on the 24M model's 1.20 M params: host (JS loop) 19–21 / 22–33 ms,
 *     an ONNX session, copies included, 11–12 / 18–22 ms
 *
 * The in-graph update is now a little faster on the CPU too (the median 3–7% at 24M, 0–4% at
 * 260K). The CPU's default stays 'host': the graph holds its joined gradients and weights, the
 * new moments and weights and their copies out, five to seven vectors of 4 bytes per trained
 * weight that the in-place host update does not (0.9–1.2 GB at the Qwen3-8B shape's 43.6 M LoRA
 * weights), which a QLoRA run on a 16 GB laptop cannot spare for a few per cent; and the host
 * update uses float64 scalars, so SGD moves a weight by
 * exactly −lr·g. On a GPU the default is 'graph' (./step-options.ts OPTIMIZER_PLACEMENT): there
 * the host loop over a 0.6B model's 10.1 M LoRA weights (160–260 ms a step here) is a large
 * share of a step that takes half a second, and the GPU runs the update's kernels in far less.
 *
 * Sessions are created on the requested EP only (../model/ort-session.ts: CUDA when its
 * provider is installed, else a UserError; never a silent CPU fallback).
 */
import { UserError } from '../../src-shared/types.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { checkpointWeights, type WeightSource } from '../model/decoder.js';
import { checkOptions } from './step-checks.js';
import { ort, createSession, fusesMatMul } from '../model/ort-session.js';
import { OPTIMIZER_PLACEMENT, memoryOptions, sessionConfig, type OptimizerPlacement, type TrainStepOptions } from './step-options.js';
import type { Device } from '../model/ort-session.js';
import type {
  LoraConfig, LoraTensorSpec, LoraWeights, LossConfig, OptimizerConfig, OptimizerState, StepBatch, StepMetrics, StepResult, TeacherTopK, TrainStep,
} from './training-step.js';
import { methodLoss, type LossMetric } from '../../src-shared/training-methods.js';
import { buildForwardGraph, buildTopKGraph, buildTrainGraph, gradName, loraKeys, TOPK_KL_SUM } from './step-graph.js';
import { TopKTeacher } from './step-topk.js';
import { checkLossBatch, checkTokens, distilledTokens, lossFeeds, lossWeightGrid, modelFeeds, pickAll, pickResponse, toGrid, type LossNeeds, type Picked } from './step-feeds.js';
import { microBatches, placeRows, type MicroBatch } from './micro-batch.js';
import { isValueHeadKey, valueHeadShapes } from './value-head.js';
import { FlatLayout, GRAD_NORM, applyUpdate, clipScale, emptyState, globalGradNorm, updateOutputs } from './step-optimizer.js';

/** Builds the training graph and its session now, in this thread (so a bad model or device fails here). */
export function createTrainStep(model: string | Checkpoint | WeightSource, options: TrainStepOptions): Promise<TrainStepEngine> {
  return TrainStepEngine.create(model, options);
}

/** What one pass of the training graph gives, before any update. */
export interface Gradients {
  /** The metrics the step's loss declares, by key (PPO-clip: clipfrac, approxKl; ./losses.ts). */
  readonly [metric: string]: unknown;
  loss: number;
  grads: LoraWeights;
  /** Policy log-probs on the batch's [B, T] grid, at the trained tokens only (0 elsewhere). */
  logprobs: Float32Array;
  tokens: number;
  /** With a value head: the values on the same grid, and the value loss. */
  values?: Float32Array;
  valueLoss?: number;
  /** With top-K OPD: the token mean of the top-K KL where a teacher distils, over the whole batch. */
  topkKl?: number;
}

/** What one pass (a micro-batch) of the training graph gives, before the passes are added up. */
interface Pass {
  loss: number;
  metrics: number[];
  tokens: number;
  valueLoss: number;
  topkKlSum: number;
  /** Absent from an in-graph step, which does not fetch them. */
  grads?: LoraWeights;
  logprobs: Float32Array;
  values?: Float32Array;
}

const scalarOf = (t: ort.Tensor | undefined) => (t!.data as Float32Array)[0]!;

export class TrainStepEngine implements TrainStep {
  private forwardSession?: Promise<ort.InferenceSession>;
  /** The top-K OPD teacher's pass (./step-topk.ts). */
  private readonly topK: TopKTeacher;
  private zeroLora?: LoraWeights;
  /** The in-graph update's inputs at a fresh state: what a pass that only reads the gradients feeds them. */
  private idleUpdateFeeds?: Record<string, ort.Tensor>;
  private closed = false;
  /** Every trained tensor's dims by key: the LoRA pairs, then the value head's two. */
  private readonly paramDims: Map<string, number[]>;
  /** Where each trained tensor lies in the in-graph update's flat vectors. */
  private readonly flat: FlatLayout;

  private constructor(
    private readonly weights: WeightSource,
    private readonly options: TrainStepOptions,
    private readonly trainSession: ort.InferenceSession,
    readonly specs: LoraTensorSpec[],
    readonly executionProvider: Device,
    readonly placement: OptimizerPlacement,
  ) {
    const r = options.lora.r;
    this.paramDims = new Map(specs.flatMap((spec) => {
      const k = loraKeys(spec);
      return [[k.a, [r, spec.inFeatures]], [k.b, [spec.outFeatures, r]]];
    }));
    if (options.value) for (const [k, dims] of valueHeadShapes(weights.config.hiddenSize)) this.paramDims.set(k, dims);
    this.flat = new FlatLayout(new Map([...this.paramDims].map(([k, dims]) => [k, dims.reduce((a, d) => a * d, 1)])));
    this.topK = new TopKTeacher(weights.config.vocabSize, (k) => {
      const { graph } = buildTopKGraph(weights, options.lora, memoryOptions(options, weights), k, { fusedScores: fusesMatMul(options.device) });
      return createSession(graph, sessionConfig(options, weights)).then((s) => s.session);
    });
  }

  get valueHead(): boolean {
    return this.options.value !== undefined;
  }

  /** Builds the training graph and its session now (so a bad model or device fails here). */
  static async create(model: string | Checkpoint | WeightSource, options: TrainStepOptions): Promise<TrainStepEngine> {
    checkOptions(options);
    // A WeightSource of its own: bench/train-memory.ts's 8B shape, written straight into quantised blocks.
    const weights = typeof model === 'string' ? checkpointWeights(Checkpoint.open(model)) : model instanceof Checkpoint ? checkpointWeights(model) : model;
    const placement = options.placement ?? OPTIMIZER_PLACEMENT[options.device];
    const { graph, specs } = buildTrainGraph(weights, {
      lora: options.lora,
      memory: memoryOptions(options, weights),
      loss: options.loss,
      optimizerInGraph: placement === 'graph' ? options.optimizer : undefined,
      value: options.value,
    });
    const { session, executionProvider } = await createSession(graph, sessionConfig(options, weights));
    return new TrainStepEngine(weights, options, session, specs, executionProvider, placement);
  }

  private forward(): Promise<ort.InferenceSession> {
    if (!this.forwardSession) {
      const { graph } = buildForwardGraph(this.weights, this.options.lora, memoryOptions(this.options, this.weights), { valueHead: this.valueHead, fusedScores: fusesMatMul(this.options.device) });
      this.forwardSession = createSession(graph, sessionConfig(this.options, this.weights)).then((s) => s.session);
      this.forwardSession.catch(() => (this.forwardSession = undefined));
    }
    return this.forwardSession;
  }

  async baseTopK(batch: StepBatch, k: number): Promise<{ logprobs: Float32Array; topK: TeacherTopK }> {
    this.checkOpen();
    checkTokens(batch, this.weights.config.vocabSize);
    const params = this.paramFeeds(this.zeroWeights(), true);
    const parts = microBatches(batch, this.options.microBatch);
    if (parts.length === 1) return this.topK.score(batch, k, params);
    const cells = batch.batch * batch.seqLen;
    const out = { logprobs: new Float32Array(cells), topK: { k, logprobs: new Float32Array(cells * k), indices: new Int32Array(cells * k) } };
    for (const part of parts) {
      const got = await this.topK.score(part.batch, k, params);
      placeRows(out.logprobs, batch.seqLen, got.logprobs, part);
      placeRows(out.topK.logprobs, batch.seqLen, got.topK.logprobs, part, k);
      placeRows(out.topK.indices, batch.seqLen, got.topK.indices, part, k);
    }
    return out;
  }

  async policyLogprobs(batch: StepBatch, weights: LoraWeights): Promise<Float32Array> {
    this.checkOpen();
    // Scoring needs no value head: one left out is fed as zeros.
    const [logprobs] = await this.forwardPasses(batch, this.paramFeeds(weights, true), ['logprobs']);
    return logprobs!;
  }

  async policyValues(batch: StepBatch, weights: LoraWeights): Promise<{ logprobs: Float32Array; values: Float32Array }> {
    this.checkOpen();
    if (!this.valueHead) throw new Error('policyValues: this training step has no value head');
    const [logprobs, values] = await this.forwardPasses(batch, this.paramFeeds(weights), ['logprobs', 'values']);
    return { logprobs: logprobs!, values: values! };
  }

  /** The forward graph's `fetches` at every token of the batch, on its [B, T] grid, a micro-batch at a time. */
  private async forwardPasses(batch: StepBatch, params: Record<string, ort.Tensor>, fetches: string[]): Promise<Float32Array[]> {
    checkTokens(batch, this.weights.config.vocabSize);
    const session = await this.forward();
    const grids = fetches.map(() => new Float32Array(batch.batch * batch.seqLen));
    for (const part of microBatches(batch, this.options.microBatch)) {
      const picked = pickAll(part.batch);
      const out = await session.run({ ...modelFeeds(part.batch, picked), ...params }, fetches);
      fetches.forEach((name, i) => placeRows(grids[i]!, batch.seqLen, toGrid(out[name]!.data as Float32Array, picked, part.batch), part));
    }
    return grids;
  }

  async baseLogprobs(batch: StepBatch): Promise<Float32Array> {
    return this.policyLogprobs(batch, this.zeroWeights());
  }

  /** LoRA weights of zeros: the base model. */
  private zeroWeights(): LoraWeights {
    this.zeroLora ??= new Map(this.specs.flatMap((s) => {
      const k = loraKeys(s);
      return [[k.a, new Float32Array(this.options.lora.r * s.inFeatures)], [k.b, new Float32Array(s.outFeatures * this.options.lora.r)]];
    }));
    return this.zeroLora;
  }

  /**
   * Loss, metrics and gradients at `weights`, without an update (host placement's first half):
   * one pass of the training graph, or one per micro-batch, added up (./micro-batch.ts).
   */
  async gradients(batch: StepBatch, weights: LoraWeights): Promise<Gradients> {
    this.checkOpen();
    const parts = this.trainParts(batch, this.options.microBatch);
    const params = this.paramFeeds(weights);
    // The in-graph optimizer's inputs must be fed even though only the gradients are fetched:
    // zeros made once (AdamW's two flat moments are 80 MB at the 0.6B shape's adapter).
    if (this.placement === 'graph') Object.assign(params, this.idleUpdateFeeds ??= this.flat.feeds(this.options.optimizer, emptyState()));
    const passes: Pass[] = [];
    for (const part of parts) {
      const picked = pickResponse(part.batch);
      const out = await this.trainSession.run({ ...this.feeds(part, picked), ...params }, this.trainFetches());
      passes.push(this.readPass(out, part, picked));
    }
    return this.addUp(passes, parts, batch);
  }

  async step(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult> {
    this.checkOpen();
    // The in-graph update needs the whole gradient in one pass; micro-batches are added up on the host and updated there.
    if (this.placement === 'graph' && (this.options.microBatch ?? Infinity) >= batch.batch) return this.stepInGraph(batch, weights, state);
    const g = await this.gradients(batch, weights);
    const gradNorm = globalGradNorm(g.grads);
    const metrics = this.metrics(g, gradNorm);
    if (!Number.isFinite(g.loss) || !Number.isFinite(gradNorm)) return { weights, state, metrics, grads: g.grads, logprobs: g.logprobs, values: g.values };
    const next = applyUpdate(this.options.optimizer, weights, g.grads, state, clipScale(gradNorm, this.options.optimizer.maxGradNorm));
    return { ...next, metrics, grads: g.grads, logprobs: g.logprobs, values: g.values };
  }

  /**
   * One run that updates too. It fetches the new weights and moments but not the gradients: on a
   * GPU each fetched output crosses the bus, and the gradients would add 4 bytes per trained
   * weight a step (40 MB at the 0.6B shape's adapter) that nothing reads. So its result has no
   * `grads`; `gradients()` gives them on any placement.
   */
  private async stepInGraph(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult> {
    const [part] = this.trainParts(batch, undefined);
    const picked = pickResponse(batch);
    const feeds = { ...this.feeds(part!, picked), ...this.paramFeeds(weights), ...this.flat.feeds(this.options.optimizer, state) };
    const out = await this.trainSession.run(feeds, [...this.trainFetches(false), ...updateOutputs(this.options.optimizer)]);
    const g = this.addUp([this.readPass(out, part!, picked)], [part!], batch);
    const gradNorm = scalarOf(out[GRAD_NORM] as ort.Tensor);
    const metrics = this.metrics(g, gradNorm);
    if (!Number.isFinite(g.loss) || !Number.isFinite(gradNorm)) return { weights, state, metrics, logprobs: g.logprobs, values: g.values };
    // Into the caller's arrays, where the host update writes too (./step-optimizer.ts applyUpdate).
    this.flat.apply(this.options.optimizer, out, weights, state);
    return { weights, state: { step: state.step + 1, m: state.m, v: state.v }, metrics, logprobs: g.logprobs, values: g.values };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.trainSession.release();
    const fwd = await this.forwardSession?.catch(() => undefined);
    await fwd?.release();
    await this.topK.close();
  }

  // ---- feeds and fetches ---------------------------------------------------------------

  private checkOpen(): void {
    if (this.closed) throw new Error('the training step is closed');
  }

  private dims(key: string): number[] {
    const dims = this.paramDims.get(key);
    if (!dims) throw new Error(`training step: '${key}' is not one of its parameters`);
    return dims;
  }

  /** Every trained tensor, checked; `zeroValueHead`: a value head left out is fed as zeros. */
  private paramFeeds(weights: LoraWeights, zeroValueHead = false): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const [key, dims] of this.paramDims) {
      const size = dims.reduce((a, d) => a * d, 1);
      feeds[key] = zeroValueHead && isValueHeadKey(key) && !weights.has(key) ? new ort.Tensor('float32', new Float32Array(size), dims) : paramTensor(weights, key, dims);
    }
    return feeds;
  }

  /** What the training graph reads besides the model's inputs (./step-feeds.ts LossNeeds). */
  private needs(): LossNeeds {
    const loss = this.options.loss;
    // A LossConfig without lossAgg is token-mean, what every step did before the option existed.
    return { ref: loss.klBeta > 0, value: this.valueHead, lossAgg: loss.lossAgg ?? 'token-mean', topK: loss.opdTopK ?? 0 };
  }

  /** The one way a batch reaches the training graph: checked whole, once (the feeds do not check again), then cut into micro-batches. */
  private trainParts(batch: StepBatch, microBatch: number | undefined): MicroBatch[] {
    const needs = this.needs();
    checkLossBatch(batch, needs, this.weights.config.vocabSize);
    // Every token's weight in the whole batch's mean, whichever micro-batch it goes through.
    return microBatches(batch, microBatch, [lossWeightGrid(batch, needs.lossAgg)]);
  }

  /** A micro-batch's feeds; its loss weights are its cells' weights in the whole batch's mean. */
  private feeds(part: MicroBatch, picked: Picked): Record<string, ort.Tensor> {
    return { ...modelFeeds(part.batch, picked), ...lossFeeds(part.batch, picked, this.needs(), part.grids[0]) };
  }

  /** The metrics the run's loss declares (./losses.ts): the graph outputs the step fetches besides the loss. */
  private get lossMetrics(): readonly LossMetric[] {
    return methodLoss(this.options.loss.method).metrics;
  }

  /** The training graph's outputs a pass reads; `withGradients` false: all but the gradients. */
  private trainFetches(withGradients = true): string[] {
    const value = this.valueHead ? ['values', 'value_loss'] : [];
    const topK = this.options.loss.opdTopK ? [TOPK_KL_SUM] : [];
    const grads = withGradients ? [...this.paramDims.keys()].map(gradName) : [];
    return ['loss', 'logprobs', ...this.lossMetrics.map((m) => m.field), 'tokens', ...value, ...topK, ...grads];
  }

  /** One pass's outputs; its log-probs and values on its micro-batch's grid. */
  private readPass(out: ort.InferenceSession.OnnxValueMapType, part: MicroBatch, picked: Picked): Pass {
    const fetched = [...this.paramDims.keys()].every((key) => out[gradName(key)] !== undefined);
    const grads: LoraWeights | undefined = fetched ? new Map() : undefined;
    for (const key of grads ? this.paramDims.keys() : []) grads!.set(key, (out[gradName(key)] as ort.Tensor).data as Float32Array);
    return {
      loss: scalarOf(out.loss as ort.Tensor),
      metrics: this.lossMetrics.map((m) => scalarOf(out[m.field] as ort.Tensor)),
      tokens: scalarOf(out.tokens as ort.Tensor),
      valueLoss: this.valueHead ? scalarOf(out.value_loss as ort.Tensor) : 0,
      topkKlSum: this.options.loss.opdTopK ? scalarOf(out[TOPK_KL_SUM] as ort.Tensor) : 0,
      ...(grads ? { grads } : {}),
      logprobs: toGrid((out.logprobs as ort.Tensor).data as Float32Array, picked, part.batch),
      ...(this.valueHead ? { values: toGrid((out.values as ort.Tensor).data as Float32Array, picked, part.batch) } : {}),
    };
  }

  /**
   * The passes added up: each is its micro-batch's share of the batch's loss, metrics and
   * gradients (its tokens weighed in the whole batch's mean), so their sums are the batch's; the
   * top-K KL's sum is divided by the batch's distilled tokens; log-probs and values go back to
   * the batch's grid.
   */
  private addUp(passes: Pass[], parts: MicroBatch[], batch: StepBatch): Gradients {
    const sum = (f: (p: Pass) => number) => passes.reduce((a, p) => a + f(p), 0);
    const [first, ...rest] = passes;
    // Every pass fetches its gradients but an in-graph step's one pass, which fetches none.
    const grads = first!.grads ?? new Map<string, Float32Array>();
    for (const p of rest) {
      for (const [key, g] of p.grads!) {
        const into = grads.get(key)!;
        for (let i = 0; i < g.length; i++) into[i]! += g[i]!;
      }
    }
    const whole = (grid: (p: Pass) => Float32Array) => {
      if (passes.length === 1) return grid(first!);
      const out = new Float32Array(batch.batch * batch.seqLen);
      passes.forEach((p, i) => placeRows(out, batch.seqLen, grid(p), parts[i]!));
      return out;
    };
    const metrics = Object.fromEntries(this.lossMetrics.map((m, i) => [m.key, sum((p) => p.metrics[i]!)]));
    return {
      ...(this.valueHead ? { values: whole((p) => p.values!), valueLoss: sum((p) => p.valueLoss) } : {}),
      ...(this.options.loss.opdTopK ? { topkKl: sum((p) => p.topkKlSum) / Math.max(distilledTokens(batch), 1) } : {}),
      ...metrics,
      loss: sum((p) => p.loss),
      grads,
      logprobs: whole((p) => p.logprobs),
      tokens: sum((p) => p.tokens),
    };
  }

  private metrics(g: Gradients, gradNorm: number): StepMetrics {
    return {
      ...Object.fromEntries(this.lossMetrics.map((m) => [m.key, g[m.key] as number])),
      loss: g.loss, gradNorm, tokens: g.tokens, ...(g.valueLoss !== undefined ? { valueLoss: g.valueLoss } : {}), ...(g.topkKl !== undefined ? { topkKl: g.topkKl } : {}),
    };
  }
}

function paramTensor(weights: LoraWeights, key: string, dims: number[]): ort.Tensor {
  const what = isValueHeadKey(key) ? 'value head' : 'LoRA weights';
  const w = weights.get(key);
  if (!w) throw new UserError(`${what}: missing '${key}'`);
  const size = dims.reduce((a, d) => a * d, 1);
  if (w.length !== size) throw new UserError(`${what}: '${key}' has ${w.length} values, expected [${dims}] = ${size}`);
  return new ort.Tensor('float32', w, dims);
}

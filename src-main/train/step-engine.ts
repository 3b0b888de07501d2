/**
 * The in-thread training step: ONNX Runtime sessions for the forward and training graphs
 * (./step-graph.ts) of one model + LoRA + loss + optimizer configuration, built through
 * `createTrainStep` (./training-step.ts). ONNX Runtime blocks the thread that calls it, so
 * the app and the CLI run it in the trainer's worker thread (./trainer-thread.ts).
 *
 * Where the optimizer runs. The Node binding copies every input and output through host
 * memory, so the in-graph update (./step-optimizer.ts `appendUpdate`) pays for sending the AdamW
 * moments in and the new weights and moments out (and ~12 small nodes per tensor), while the
 * host update pays a single-threaded JS loop over the LoRA weights. Both are implemented
 * (`placement`); measured with `npx tsx test/train/step-placement-bench.ts --steps 10` on
 * the CPU EP of a 2-core VM shared with other jobs (load average 6–9, so single runs swing
 * 2–3×; the two placements alternate step by step so load hits both alike). AdamW, LoRA
 * r=16/alpha 32 on all seven targets, batch 4 × 128; min / median per run, five runs:
 *
 *   random Llama 24M (hidden 512, 8 layers), 1.20 M LoRA params, 10 steps per run
 *     host   1269/2345  2763/3439  2155/2968   578/1894  3204/4083 ms
 *     graph  1442/2381  2684/3686  2272/2669   737/1827  2896/3884 ms
 *   stories260K, 0.09 M LoRA params (5 runs, 8–40 steps)
 *     host    308/357    297/367    308/339    121/153    269/420 ms
 *     graph   331/401    312/370    287/328    150/225    273/403 ms
 *   the AdamW update alone on the 24M model’s 1.20 M params (15–30 repeats)
 *     host (JS loop)                 43/71   27/33   33/65 ms
 *     ONNX session, copies included  26/49   17/26   29/75 ms
 *
 * For the whole step the two are within the noise on the 24M model (each wins some runs),
 * and the host update is ahead on stories260K (min faster in 4 of 5 runs), where the in-graph
 * version's hundreds of tiny nodes cost more than the JS loop over 90 K weights. So the
 * default is 'host': as fast here, simpler (fewer graph inputs and outputs), and its update
 * uses float64 scalars, so SGD moves a weight by exactly −lr·g. 'graph' stays available; it
 * may pay off for adapters of tens of millions of weights, where the update alone favours it.
 *
 * Sessions are created on the requested EP only (../model/ort-session.ts: CUDA when its
 * provider is installed, else a UserError; never a silent CPU fallback).
 */
import { UserError } from '../../src-shared/types.js';
import { Checkpoint } from '../model/hf-checkpoint.js';
import { checkpointWeights, type WeightSource } from '../model/decoder.js';
import { ort, createSession, type Device } from '../model/ort-session.js';
import type {
  LoraConfig, LoraTensorSpec, LoraWeights, LossConfig, OptimizerConfig, OptimizerState, StepBatch, StepMetrics, StepResult, TrainStep,
} from './training-step.js';
import { buildForwardGraph, buildTrainGraph, gradName, loraKeys } from './step-graph.js';
import { SCALAR_INPUTS, applyUpdate, clipScale, emptyState, globalGradNorm, stateNames, updateScalars } from './step-optimizer.js';

export type OptimizerPlacement = 'host' | 'graph';

export interface TrainStepOptions {
  lora: LoraConfig;
  loss: LossConfig;
  optimizer: OptimizerConfig;
  device: Device;
  /** Intra-op threads; default: ONNX Runtime's choice. */
  threads?: number;
  /** Where the optimizer update runs; default {@link DEFAULT_PLACEMENT}. */
  placement?: OptimizerPlacement;
  /** Folder for graphs too big to hand over in memory; default the OS temp folder. */
  cacheDir?: string;
}

/** The faster of the two in the measurements above. */
export const DEFAULT_PLACEMENT: OptimizerPlacement = 'host';

/** What one pass of the training graph gives, before any update. */
export interface Gradients {
  loss: number;
  grads: LoraWeights;
  /** Policy log-probs on the batch's [B, T] grid (position 0 is 0). */
  logprobs: Float32Array;
  clipfrac: number;
  approxKl: number;
  tokens: number;
}

const scalarOf = (t: ort.Tensor | undefined) => (t!.data as Float32Array)[0]!;

export class TrainStepEngine implements TrainStep {
  private forwardSession?: Promise<ort.InferenceSession>;
  private zeroLora?: LoraWeights;
  private closed = false;

  private constructor(
    private readonly weights: WeightSource,
    private readonly options: TrainStepOptions,
    private readonly trainSession: ort.InferenceSession,
    readonly specs: LoraTensorSpec[],
    readonly executionProvider: Device,
    readonly placement: OptimizerPlacement,
  ) {}

  /** Builds the training graph and its session now (so a bad model or device fails here). */
  static async create(model: string | Checkpoint, options: TrainStepOptions): Promise<TrainStepEngine> {
    checkOptions(options);
    const checkpoint = typeof model === 'string' ? Checkpoint.open(model) : model;
    const weights = checkpointWeights(checkpoint);
    const placement = options.placement ?? DEFAULT_PLACEMENT;
    const { graph, specs } = buildTrainGraph(weights, {
      lora: options.lora,
      loss: options.loss,
      optimizerInGraph: placement === 'graph' ? options.optimizer : undefined,
    });
    const { session, executionProvider } = await createSession(graph, { device: options.device, threads: options.threads, cacheDir: options.cacheDir });
    return new TrainStepEngine(weights, options, session, specs, executionProvider, placement);
  }

  private forward(): Promise<ort.InferenceSession> {
    if (!this.forwardSession) {
      const { graph } = buildForwardGraph(this.weights, this.options.lora);
      this.forwardSession = createSession(graph, { device: this.options.device, threads: this.options.threads, cacheDir: this.options.cacheDir }).then((s) => s.session);
      this.forwardSession.catch(() => (this.forwardSession = undefined));
    }
    return this.forwardSession;
  }

  async policyLogprobs(batch: StepBatch, weights: LoraWeights): Promise<Float32Array> {
    this.checkOpen();
    const feeds = { ...this.modelFeeds(batch), ...this.loraFeeds(weights) };
    const out = await (await this.forward()).run(feeds);
    return toGrid(out.logprobs!.data as Float32Array, batch);
  }

  async baseLogprobs(batch: StepBatch): Promise<Float32Array> {
    this.zeroLora ??= new Map(this.specs.flatMap((s) => {
      const k = loraKeys(s);
      return [[k.a, new Float32Array(this.options.lora.r * s.inFeatures)], [k.b, new Float32Array(s.outFeatures * this.options.lora.r)]];
    }));
    return this.policyLogprobs(batch, this.zeroLora);
  }

  /** Loss, metrics and gradients at `weights`, without an update (host placement's first half). */
  async gradients(batch: StepBatch, weights: LoraWeights): Promise<Gradients> {
    this.checkOpen();
    const feeds = { ...this.modelFeeds(batch), ...this.lossFeeds(batch), ...this.loraFeeds(weights) };
    // The in-graph optimizer's inputs must be fed even though only the gradients are fetched.
    if (this.placement === 'graph') Object.assign(feeds, this.optimizerFeeds(weights, emptyState()));
    const out = await this.trainSession.run(feeds, this.trainFetches());
    return this.readGradients(out, batch);
  }

  async step(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult> {
    this.checkOpen();
    if (this.placement === 'host') {
      const g = await this.gradients(batch, weights);
      const gradNorm = globalGradNorm(g.grads);
      const metrics = this.metrics(g, gradNorm);
      if (!Number.isFinite(g.loss) || !Number.isFinite(gradNorm)) return { weights, state, metrics, grads: g.grads, logprobs: g.logprobs };
      const next = applyUpdate(this.options.optimizer, weights, g.grads, state, clipScale(gradNorm, this.options.optimizer.maxGradNorm));
      return { ...next, metrics, grads: g.grads, logprobs: g.logprobs };
    }
    return this.stepInGraph(batch, weights, state);
  }

  private async stepInGraph(batch: StepBatch, weights: LoraWeights, state: OptimizerState): Promise<StepResult> {
    const cfg = this.options.optimizer;
    const step = state.step + 1;
    const feeds = { ...this.modelFeeds(batch), ...this.lossFeeds(batch), ...this.loraFeeds(weights), ...this.optimizerFeeds(weights, state) };
    const out = await this.trainSession.run(feeds);
    const g = this.readGradients(out, batch);
    const gradNorm = scalarOf(out.grad_norm as ort.Tensor);
    const metrics = this.metrics(g, gradNorm);
    if (!Number.isFinite(g.loss) || !Number.isFinite(gradNorm)) return { weights, state, metrics, grads: g.grads, logprobs: g.logprobs };
    const next: LoraWeights = new Map(), m = new Map<string, Float32Array>(), v = new Map<string, Float32Array>();
    for (const key of weights.keys()) {
      const n = stateNames(key);
      next.set(key, (out[n.newP] as ort.Tensor).data as Float32Array);
      if (cfg.kind === 'adamw') {
        m.set(key, (out[n.newM] as ort.Tensor).data as Float32Array);
        v.set(key, (out[n.newV] as ort.Tensor).data as Float32Array);
      }
    }
    return { weights: next, state: { step, m, v }, metrics, grads: g.grads, logprobs: g.logprobs };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.trainSession.release();
    const fwd = await this.forwardSession?.catch(() => undefined);
    await fwd?.release();
  }

  // ---- feeds and fetches ---------------------------------------------------------------

  private checkOpen(): void {
    if (this.closed) throw new Error('the training step is closed');
  }

  private dims(key: string): number[] {
    const spec = this.specs.find((s) => key.startsWith(s.module + '.'))!;
    return key.endsWith('lora_A.weight') ? [this.options.lora.r, spec.inFeatures] : [spec.outFeatures, this.options.lora.r];
  }

  private loraFeeds(weights: LoraWeights): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    const r = this.options.lora.r;
    for (const spec of this.specs) {
      const k = loraKeys(spec);
      feeds[k.a] = loraTensor(weights, k.a, [r, spec.inFeatures]);
      feeds[k.b] = loraTensor(weights, k.b, [spec.outFeatures, r]);
    }
    return feeds;
  }

  private modelFeeds(batch: StepBatch): Record<string, ort.Tensor> {
    checkTokens(batch, this.weights.config.vocabSize);
    const { batch: B, seqLen: T } = batch;
    const targets = new BigInt64Array(B * T);
    for (let r = 0; r < B; r++) targets.set(batch.inputIds.subarray(r * T + 1, (r + 1) * T), r * T);
    const dims = [B, T];
    return {
      input_ids: new ort.Tensor('int64', batch.inputIds, dims),
      attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
      position_ids: new ort.Tensor('int64', batch.positionIds, dims),
      target_ids: new ort.Tensor('int64', targets, dims),
    };
  }

  private lossFeeds(batch: StepBatch): Record<string, ort.Tensor> {
    const needsRef = this.options.loss.klBeta > 0;
    type Named = [string, Float32Array | undefined];
    const optional: Named[] = [['oldFromPolicy', batch.oldFromPolicy], ['teacherLogprobs', batch.teacherLogprobs], ['opdWeights', batch.opdWeights]];
    checkArrays(batch, [
      ['responseMask', batch.responseMask], ['oldLogprobs', batch.oldLogprobs], ['advantages', batch.advantages],
      ...(needsRef ? [['refLogprobs', batch.refLogprobs] as Named] : []),
      ...optional.filter(([, a]) => a !== undefined),
    ]);
    const dims = [batch.batch, batch.seqLen];
    const grid = (a: Float32Array | undefined) => new ort.Tensor('float32', a ? fromGrid(a, batch) : new Float32Array(batch.batch * batch.seqLen), dims);
    const feeds: Record<string, ort.Tensor> = {
      response_mask: grid(batch.responseMask),
      old_logprobs: grid(batch.oldLogprobs),
      advantages: grid(batch.advantages),
      // Absent: zeros, so old and the advantages are exactly the ones given.
      old_from_policy: grid(batch.oldFromPolicy),
      teacher_logprobs: grid(batch.teacherLogprobs),
      opd_weights: grid(batch.opdWeights),
    };
    if (needsRef) feeds.ref_logprobs = grid(batch.refLogprobs!);
    return feeds;
  }

  private optimizerFeeds(weights: LoraWeights, state: OptimizerState): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    const s = updateScalars(this.options.optimizer, state.step + 1);
    [s.lr, s.decay, s.stepSize, s.bc2Sqrt].forEach((v, i) => (feeds[SCALAR_INPUTS[i]!] = new ort.Tensor('float32', Float32Array.of(v), [])));
    if (this.options.optimizer.kind === 'adamw') {
      for (const [key, p] of weights) {
        const n = stateNames(key);
        feeds[n.m] = new ort.Tensor('float32', state.m.get(key) ?? new Float32Array(p.length), this.dims(key));
        feeds[n.v] = new ort.Tensor('float32', state.v.get(key) ?? new Float32Array(p.length), this.dims(key));
      }
    }
    return feeds;
  }

  private trainFetches(): string[] {
    const keys = this.specs.flatMap((s) => Object.values(loraKeys(s)));
    return ['loss', 'logprobs', 'clipfrac', 'approx_kl', 'tokens', ...keys.map(gradName)];
  }

  private readGradients(out: ort.InferenceSession.OnnxValueMapType, batch: StepBatch): Gradients {
    const grads: LoraWeights = new Map();
    for (const spec of this.specs) {
      for (const key of Object.values(loraKeys(spec))) grads.set(key, (out[gradName(key)] as ort.Tensor).data as Float32Array);
    }
    return {
      loss: scalarOf(out.loss as ort.Tensor),
      grads,
      logprobs: toGrid((out.logprobs as ort.Tensor).data as Float32Array, batch),
      clipfrac: scalarOf(out.clipfrac as ort.Tensor),
      approxKl: scalarOf(out.approx_kl as ort.Tensor),
      tokens: scalarOf(out.tokens as ort.Tensor),
    };
  }

  private metrics(g: Gradients, gradNorm: number): StepMetrics {
    return { loss: g.loss, gradNorm, clipfrac: g.clipfrac, approxKl: g.approxKl, tokens: g.tokens };
  }
}

function loraTensor(weights: LoraWeights, key: string, dims: number[]): ort.Tensor {
  const w = weights.get(key);
  if (!w) throw new UserError(`LoRA weights: missing '${key}'`);
  if (w.length !== dims[0]! * dims[1]!) throw new UserError(`LoRA weights: '${key}' has ${w.length} values, expected [${dims}] = ${dims[0]! * dims[1]!}`);
  return new ort.Tensor('float32', w, dims);
}

/** Token grid (position t = token t; docs/design.md §Losses) → graph grid (position t = token t+1). */
function fromGrid(grid: Float32Array, batch: StepBatch): Float32Array {
  const { batch: B, seqLen: T } = batch;
  const out = new Float32Array(B * T);
  for (let r = 0; r < B; r++) out.set(grid.subarray(r * T + 1, (r + 1) * T), r * T);
  return out;
}

/** Graph grid → token grid; position 0 of each row (no preceding logits) is 0. */
function toGrid(graphGrid: Float32Array, batch: StepBatch): Float32Array {
  const { batch: B, seqLen: T } = batch;
  const out = new Float32Array(B * T);
  for (let r = 0; r < B; r++) out.set(graphGrid.subarray(r * T, (r + 1) * T - 1), r * T + 1);
  return out;
}

function checkArrays(batch: StepBatch, arrays: [string, { length: number } | undefined][]): void {
  const { batch: B, seqLen: T } = batch;
  if (!Number.isInteger(B) || B < 1 || !Number.isInteger(T) || T < 2) throw new UserError(`step batch: needs at least 1 row of 2 tokens, got ${B} × ${T}`);
  for (const [name, a] of arrays) {
    if (!a) throw new UserError(`step batch: ${name} is missing${name === 'refLogprobs' ? ' (the KL penalty needs it)' : ''}`);
    if (a.length !== B * T) throw new UserError(`step batch: ${name} has ${a.length} values, expected ${B} × ${T} = ${B * T}`);
  }
}

function checkTokens(batch: StepBatch, vocabSize: number): void {
  checkArrays(batch, [['inputIds', batch.inputIds], ['attentionMask', batch.attentionMask], ['positionIds', batch.positionIds]]);
  const T = batch.seqLen;
  for (let i = 0; i < batch.inputIds.length; i++) {
    const id = batch.inputIds[i]!;
    if (id < 0n || id >= BigInt(vocabSize)) throw new UserError(`step batch: token id ${id} at row ${Math.floor(i / T)}, position ${i % T} is outside the vocabulary [0, ${vocabSize})`);
  }
}

function checkOptions(o: TrainStepOptions): void {
  if (!Number.isInteger(o.lora.r) || o.lora.r < 1) throw new UserError(`LoRA rank must be a whole number ≥ 1, got ${o.lora.r}`);
  if (!(o.lora.alpha > 0)) throw new UserError(`LoRA alpha must be > 0, got ${o.lora.alpha}`);
  if (o.lora.targets.length === 0) throw new UserError('LoRA needs at least one target');
  if (!(o.optimizer.lr > 0)) throw new UserError(`learning rate must be > 0, got ${o.optimizer.lr}`);
  if (!(o.optimizer.maxGradNorm >= 0)) throw new UserError(`max grad norm must be ≥ 0 (0 disables clipping), got ${o.optimizer.maxGradNorm}`);
  if (!(o.loss.epsLow >= 0 && o.loss.epsLow < 1) || !(o.loss.epsHigh >= 0)) throw new UserError(`clip range must have 0 ≤ ε_low < 1 and ε_high ≥ 0, got ${o.loss.epsLow} / ${o.loss.epsHigh}`);
  if (!(o.loss.klBeta >= 0)) throw new UserError(`KL β must be ≥ 0, got ${o.loss.klBeta}`);
}

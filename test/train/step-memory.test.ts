// The memory-saving forms of the training step compute the same thing as the plain one
// (docs/design.md §Memory), on tiny Qwen3, Qwen2 and Llama checkpoints (tied and untied heads):
// - the chunked LM head (online log-sum-exp over vocabulary chunks, explicit gradient) against
//   one LogSoftmax over the whole vocabulary with autodiff's gradient: log-probs, loss and LoRA
//   gradients within 1e-5;
// - per-layer recomputation against keeping the activations: the same gradients;
// - attention in query chunks against attention in one piece: the same log-probs and gradients.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import type { TrainStepOptions } from '../../src-main/train/step-options.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { buildDecoder, checkpointWeights, type LinearSite } from '../../src-main/model/decoder.js';
import { GraphBuilder, type Node } from '../../src-main/graph/ir.js';
import { appendGradients } from '../../src-main/graph/autodiff.js';
import type { LoraWeights, StepBatch } from '../../src-main/train/training-step.js';
import { writeTinyModel, type TinyFamily } from '../../tools/tiny-models.js';
import { ATTENTION_CHUNKING, chunksAttention } from '../../src-main/model/attention.js';
import { LORA, lossConfig, randomLora, sgd, tinyBatch } from './step-helpers.js';
import { maxAbsDiff } from '../helpers/numbers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-step-memory-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const CASES: { family: TinyFamily; tie: boolean }[] = [
  { family: 'qwen3', tie: true },
  { family: 'qwen2', tie: false },
  { family: 'llama', tie: false },
  { family: 'llama', tie: true },
];

function gradDiff(a: LoraWeights, b: LoraWeights): number {
  let m = 0;
  for (const [key, g] of a) m = Math.max(m, maxAbsDiff(g, b.get(key)!));
  return m;
}

async function withEngine<T>(dir: string, options: Partial<TrainStepOptions>, use: (e: TrainStepEngine) => Promise<T>): Promise<T> {
  const e = await TrainStepEngine.create(dir, { lora: LORA, loss: lossConfig('combine', 0.2), optimizer: sgd(0.1), device: 'cpu', ...options });
  try {
    return await use(e);
  } finally {
    await e.close();
  }
}

interface Pass {
  forward: Float32Array;
  base: Float32Array;
  loss: number;
  logprobs: Float32Array;
  grads: LoraWeights;
}

/** The forward log-probs, the base log-probs and one gradient pass on a combine batch with the KL term. */
async function pass(dir: string, options: Partial<TrainStepOptions>, batch: StepBatch): Promise<Pass> {
  return withEngine(dir, options, async (e) => {
    const weights = randomLora(e.specs, LORA.r, 5);
    const forward = await e.policyLogprobs(batch, weights);
    const base = await e.baseLogprobs(batch);
    const g = await e.gradients({ ...batch, refLogprobs: base }, weights);
    return { forward, base, loss: g.loss, logprobs: g.logprobs, grads: g.grads };
  });
}

function combineBatch(vocab: number, seed: number): StepBatch {
  const batch = tinyBatch('combine', vocab, seed, 12);
  const n = batch.batch * batch.seqLen;
  batch.oldFromPolicy = Float32Array.from(batch.responseMask);
  batch.teacherLogprobs = Float32Array.from({ length: n }, (_, i) => (batch.responseMask[i] ? -2 - (i % 5) / 4 : 0));
  batch.opdWeights = Float32Array.from(batch.responseMask, (m) => m * 0.5);
  return batch;
}

describe.each(CASES)('$family (tied: $tie)', ({ family, tie }) => {
  const dir = path.join(root, `${family}-${tie}`);
  const model = () => {
    if (!fs.existsSync(dir)) writeTinyModel(dir, { family, tie, seed: 21, hiddenSize: 16, intermediateSize: 24, headDim: 8, numHeads: 4, numKvHeads: 2, numLayers: 3 });
    const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')).vocab_size as number;
    return { vocab, batch: combineBatch(vocab, 31) };
  };

  it('the chunked head gives the unchunked log-probs, loss and LoRA gradients within 1e-5', async () => {
    const { vocab, batch } = model();
    const plain = await pass(dir, { vocabChunk: 0 }, batch);
    // Uneven chunks (the last one short), and one chunk as large as the vocabulary.
    for (const vocabChunk of [37, vocab]) {
      const chunked = await pass(dir, { vocabChunk }, batch);
      expect(maxAbsDiff(chunked.forward, plain.forward), 'forward').toBeLessThan(1e-5);
      expect(maxAbsDiff(chunked.base, plain.base), 'base').toBeLessThan(1e-5);
      expect(maxAbsDiff(chunked.logprobs, plain.logprobs), 'train logprobs').toBeLessThan(1e-5);
      expect(Math.abs(chunked.loss - plain.loss), 'loss').toBeLessThan(1e-5);
      expect(gradDiff(chunked.grads, plain.grads), 'grads').toBeLessThan(1e-5);
    }
    // The forward pass scores every token; the training pass only the response tokens.
    for (let i = 0; i < batch.responseMask.length; i++) {
      if (batch.responseMask[i]) expect(Math.abs(plain.logprobs[i]! - plain.forward[i]!)).toBeLessThan(1e-5);
      else expect(plain.logprobs[i]).toBe(0);
    }
    expect(Math.max(...[...plain.grads.values()].map((g) => Math.max(...g.map(Math.abs))))).toBeGreaterThan(1e-3);
  });

  it('recomputing the layers gives the same gradients as keeping their activations', async () => {
    const { batch } = model();
    const kept = await pass(dir, { recompute: false }, batch);
    const recomputed = await pass(dir, { recompute: true }, batch);
    expect(recomputed.loss).toBe(kept.loss);
    expect(maxAbsDiff(recomputed.logprobs, kept.logprobs)).toBe(0);
    expect(gradDiff(recomputed.grads, kept.grads)).toBeLessThan(1e-6);
  });

  it('attention in query chunks gives the same log-probs and gradients, at any row length', async () => {
    const { batch } = model();
    const whole = await pass(dir, {}, batch);
    // 12 tokens; chunks for a max length of 12 in rows of 5 (3 chunks), of 8 (2: the row is
    // longer than the max), of 60 (12 chunks: more than the row has tokens), and with recomputation.
    for (const options of [{ maxLength: 12 }, { maxLength: 8 }, { maxLength: 60 }, { maxLength: 12, recompute: true }]) {
      const chunked = await pass(dir, { ...options, attentionChunking: { rows: 5, above: 0 } }, batch);
      const what = JSON.stringify(options);
      expect(maxAbsDiff(chunked.forward, whole.forward), `${what} forward`).toBeLessThan(1e-5);
      expect(maxAbsDiff(chunked.logprobs, whole.logprobs), `${what} train logprobs`).toBeLessThan(1e-5);
      expect(Math.abs(chunked.loss - whole.loss), `${what} loss`).toBeLessThan(1e-5);
      expect(gradDiff(chunked.grads, whole.grads), `${what} grads`).toBeLessThan(1e-5);
    }
  });

  it("chunks attention past 2,048 tokens, or where one layer's [heads, T, T] passes 256 MiB", () => {
    expect(chunksAttention(2048, ATTENTION_CHUNKING, 16)).toBe(false); // Qwen3-0.6B: 256 MiB, one piece
    expect(chunksAttention(2048, ATTENTION_CHUNKING, 32)).toBe(true); // Qwen3-8B: 512 MiB, two chunks
    expect(chunksAttention(1448, ATTENTION_CHUNKING, 32)).toBe(false);
    expect(chunksAttention(1024, ATTENTION_CHUNKING, 512)).toBe(false); // never at one chunk's rows or fewer
    expect(chunksAttention(2049, ATTENTION_CHUNKING)).toBe(true);
    expect(chunksAttention(2048, { rows: 1024, above: 2048 }, 32)).toBe(false); // by length only
  });
});

/**
 * A tiny Qwen3 decoder whose every linear gets a trained weight input, and a scalar loss on its
 * output: the forward part of a training graph, for reading the backward pass appended to it.
 */
function hookedDecoder(name: string, numLayers: number, options: { attentionChunks?: number } = {}) {
  const dir = path.join(root, name);
  writeTinyModel(dir, { family: 'qwen3', seed: 3, hiddenSize: 16, intermediateSize: 24, headDim: 8, numHeads: 4, numKvHeads: 2, numLayers });
  const b = new GraphBuilder(name);
  const paramsOf: string[][] = Array.from({ length: numLayers }, () => []);
  const linear = (g: GraphBuilder, site: LinearSite, base: string) => {
    const w = g.input(`w.${site.module}`, 'float32', [site.inFeatures, site.outFeatures]);
    paramsOf[site.layer]!.push(w);
    return g.add(base, g.matmul(site.input, w));
  };
  const values = buildDecoder(b, checkpointWeights(Checkpoint.open(dir)), { output: 'hidden', linear, ...options });
  const loss = b.reduceSum(b.mul(values.output, values.output), [0, 1, 2], false);
  return { b, values, loss, paramsOf, forwardEnd: b.graph.nodes.length };
}

/** Every value `v` depends on in `nodes`. */
function ancestorsIn(nodes: readonly Node[]): (v: string) => Set<string> {
  const producer = new Map(nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const ancestors = (v: string, seen = new Set<string>()): Set<string> => {
    for (const input of producer.get(v)?.inputs ?? []) if (input && !seen.has(input)) (seen.add(input), ancestors(input, seen));
    return seen;
  };
  return (v) => ancestors(v);
}

describe('the recomputing graph', () => {
  it('reads no activation of a recomputed layer in the backward pass, only the gated layer input', () => {
    const { b, values, loss, paramsOf, forwardEnd } = hookedDecoder('graph', 3);
    const recomputed = values.layerSpans.slice(0, -1);
    appendGradients(b, loss, paramsOf.flat(), { recompute: recomputed });
    // A layer's activations: what its nodes make and only its own nodes read (not the residual stream it hands on).
    const activations = new Set<string>();
    for (const span of recomputed) {
      const made = new Set(b.graph.nodes.slice(span.start, span.end).flatMap((n) => n.outputs));
      const handedOn = new Set(b.graph.nodes.slice(span.end, forwardEnd).flatMap((n) => n.inputs).filter((i) => made.has(i)));
      for (const v of made) if (!handedOn.has(v)) activations.add(v);
    }
    expect(activations.size).toBeGreaterThan(2 * 40);
    const backward = b.graph.nodes.slice(forwardEnd);
    expect(backward.filter((n) => n.inputs.some((i) => activations.has(i))).map((n) => n.op)).toEqual([]);
    expect(backward.filter((n) => n.name.includes('_re_')).length).toBeGreaterThan(2 * 30);
  });

  it('computes a recomputed layer\'s parameter gradients before the backward pass goes below it', () => {
    const { b, values, loss, paramsOf, forwardEnd } = hookedDecoder('graph-order', 4);
    const grads = appendGradients(b, loss, paramsOf.flat(), { recompute: values.layerSpans.slice(0, -1) });
    const producer = new Map(b.graph.nodes.map((n, i) => [n, i] as const).flatMap(([n, i]) => n.outputs.map((o) => [o, { node: n, index: i }] as const)));
    const ancestors = ancestorsIn(b.graph.nodes);
    // The products that make a gradient: the backward MatMuls reached from it through sums and reshapes.
    const products = (v: string): string[] => {
      const p = producer.get(v);
      if (!p || p.index < forwardEnd) return [];
      return p.node.op === 'MatMul' ? [v] : p.node.inputs.flatMap((i) => (i ? products(i) : []));
    };
    // Layer k − 1's recomputed copy (its gated input, whose layer input depends on the trained
    // values from layer 1 up) waits for the products of every parameter gradient of layer k.
    for (const k of [2, 3]) {
      const span = values.layerSpans[k - 1]!;
      const copies = b.graph.nodes.filter((n) => b.graph.nodes.slice(span.start, span.end).some((f) => n.name.startsWith(`${f.name}_re`)));
      const before = ancestors(copies[0]!.outputs[0]!);
      for (const w of paramsOf[k]!) {
        const made = products(grads.get(w)!);
        expect(made.length, w).toBeGreaterThan(0);
        for (const m of made) expect(before.has(m), `layer ${k}: ${w}`).toBe(true);
      }
    }
  });

  it('recomputes each attention chunk on its own, one after another, inside its recomputed layer', () => {
    const chunks = 3;
    const { b, values, loss, paramsOf, forwardEnd } = hookedDecoder('graph-chunks', 3, { attentionChunks: chunks });
    expect(values.attentionSpans).toHaveLength(3 * chunks);
    const forward = b.graph.nodes.slice(0, forwardEnd);
    appendGradients(b, loss, paramsOf.flat(), { recompute: [...values.layerSpans.slice(0, -1), ...values.attentionSpans.map((s) => ({ ...s, piece: true }))] });
    const ancestors = ancestorsIn(b.graph.nodes);
    // A chunk's own copy of its softmax: the last copy made (a recomputed layer's copy comes first).
    const chunkSoftmax = values.attentionSpans.map((span) => {
      const softmax = forward.slice(span.start, span.end).find((n) => n.op === 'Softmax')!;
      return b.graph.nodes.filter((n) => n.name.startsWith(`${softmax.name}_re`)).at(-1)!.outputs[0]!;
    });
    // No backward node reads a forward softmax: every chunk's gradient reads its own copy.
    const forwardSoftmax = new Set(forward.filter((n) => n.op === 'Softmax').flatMap((n) => n.outputs));
    expect(b.graph.nodes.slice(forwardEnd).filter((n) => n.inputs.some((i) => forwardSoftmax.has(i))).map((n) => n.op)).toEqual([]);
    // Chunk c's copy is made only after chunk c + 1's (its backward pass has run), in every layer.
    for (let layer = 0; layer < 3; layer++) {
      for (let c = 0; c < chunks - 1; c++) {
        const before = ancestors(chunkSoftmax[layer * chunks + c]!);
        expect(before.has(chunkSoftmax[layer * chunks + c + 1]!), `layer ${layer}, chunk ${c}`).toBe(true);
      }
    }
  });
});

/**
 * LoRA pairs of a model whose checkpoint fuses projections (Phi-3's qkv_proj and gate_up_proj,
 * ../model/fused-projections.ts), between the form Hindsight trains and the form PEFT and
 * llama.cpp name.
 *
 * Hindsight trains one pair per part (q, k, v; gate, up), each of rank r. PEFT and llama.cpp
 * adapt the fused module with one pair. The parts' pairs are that one pair exactly, of rank
 * n·r for a fused module of n parts: A the parts' A stacked (part j's rows at j·r), B
 * block-diagonal (part j's B in its rows and columns j·r…, zeros elsewhere), so
 * B·A = Σ_j B_j·A_j with no cross terms. A part the run did not adapt has a zero block. With
 * alpha n·alpha the scaling stays alpha / r.
 *
 * Reading goes back ({@link splitFusedPair}): where B is block-diagonal in n blocks (Hindsight's
 * own adapters, and any whose cross blocks are zero), each part gets its block, of rank R / n,
 * and a part whose A and B blocks are both zero was not adapted; otherwise (PEFT trained the
 * fused module, one A for every part) each part gets the whole A and its own rows of B, of rank
 * R. Both are exact: part j's update is its rows of B·A.
 */
import type { LinearTarget } from '../model/decoder.js';
import { fusedModuleName, fusedProjectionOf, fusedProjectionsOf, partSpans, type FusedProjection } from '../model/fused-projections.js';
import type { ModelConfig } from '../model/model-config.js';
import { PEFT_PREFIX, loraAKey, loraBKey } from './lora.js';
import type { LoraTensorSpec, LoraWeights } from './training-step.js';

/** One LoRA pair as written: a module (PEFT path), its rank, A [rank, in] and B [out, rank]. */
export interface WrittenPair {
  module: string;
  rank: number;
  inFeatures: number;
  outFeatures: number;
  a: Float32Array;
  b: Float32Array;
  /** Set for a fused module: how many parts its rank counts (rank = parts · r). */
  parts?: number;
}

/** The fused module's PEFT path in a layer (`base_model.model.model.layers.3.self_attn.qkv_proj`). */
export const fusedModulePath = (layer: number, fused: FusedProjection) => `${PEFT_PREFIX}model.layers.${layer}.${fused.module}`;

/**
 * The adapter's pairs as PEFT and llama.cpp name them: separate projections as they are, the
 * parts of a fused one (where the model fuses it) as one pair of rank parts·r, in the order of
 * `specs` (a fused module where its first adapted part was).
 */
export function writtenPairs(config: ModelConfig, specs: readonly LoraTensorSpec[], weights: LoraWeights, r: number): WrittenPair[] {
  const out: WrittenPair[] = [];
  const done = new Set<string>();
  const byPart = new Map(specs.map((s) => [`${s.layer}.${s.target}`, s]));
  for (const spec of specs) {
    const fused = fusedProjectionOf(config, spec.target);
    if (!fused) {
      out.push({ module: spec.module, rank: r, inFeatures: spec.inFeatures, outFeatures: spec.outFeatures, a: weights.get(loraAKey(spec))!, b: weights.get(loraBKey(spec))! });
      continue;
    }
    const module = fusedModulePath(spec.layer, fused);
    if (done.has(module)) continue;
    done.add(module);
    const spans = partSpans(config, fused);
    const n = spans.length, rank = n * r, inF = spec.inFeatures;
    const outF = spans.reduce((s, p) => s + p.rows, 0);
    const a = new Float32Array(rank * inF);
    const b = new Float32Array(outF * rank);
    spans.forEach(({ target, start, rows }, j) => {
      const part = byPart.get(`${spec.layer}.${target}`);
      if (!part) return; // not adapted: a zero block
      a.set(weights.get(loraAKey(part))!, j * r * inF);
      const pb = weights.get(loraBKey(part))!;
      for (let o = 0; o < rows; o++) b.set(pb.subarray(o * r, (o + 1) * r), (start + o) * rank + j * r);
    });
    out.push({ module, rank, inFeatures: inF, outFeatures: outF, a, b, parts: n });
  }
  return out;
}

/** A part's pair read from a fused module's. */
export interface PartPair {
  target: LinearTarget;
  rank: number;
  a: Float32Array;
  b: Float32Array;
}

/** The fused module a PEFT module name (`qkv_proj`) stands for in this model. */
export function fusedByName(config: ModelConfig, name: string): FusedProjection | undefined {
  return fusedProjectionsOf(config).find((f) => fusedModuleName(f) === name);
}

/** A fused module's pair (A [rank, in], B [out, rank]) as its parts' pairs (see the module comment). */
export function splitFusedPair(config: ModelConfig, fused: FusedProjection, rank: number, inF: number, a: Float32Array, b: Float32Array): PartPair[] {
  const spans = partSpans(config, fused);
  const n = spans.length;
  const block = rank % n === 0 ? rank / n : 0;
  const zero = (x: Float32Array, from: number, to: number) => x.subarray(from, to).every((v) => v === 0);
  // Block-diagonal: part j's rows of B are zero outside its columns j·block….
  const diagonal = block > 0 && spans.every(({ start, rows }, j) => {
    for (let o = start; o < start + rows; o++) {
      if (!zero(b, o * rank, o * rank + j * block) || !zero(b, o * rank + (j + 1) * block, (o + 1) * rank)) return false;
    }
    return true;
  });
  const parts: PartPair[] = [];
  spans.forEach(({ target, start, rows }, j) => {
    const from = diagonal ? j * block : 0, width = diagonal ? block : rank;
    const pa = a.slice(from * inF, (from + width) * inF);
    const pb = new Float32Array(rows * width);
    for (let o = 0; o < rows; o++) pb.set(b.subarray((start + o) * rank + from, (start + o) * rank + from + width), o * width);
    if (diagonal && zero(pa, 0, pa.length) && zero(pb, 0, pb.length)) return; // a part the adapter leaves alone
    parts.push({ target, rank: width, a: pa, b: pb });
  });
  return parts;
}

/**
 * The value head of the `gae` estimator (docs/design.md §Advantage estimators): one linear
 * map from the final-normed hidden state to a scalar, `value_head.weight` [1, hidden] and
 * `value_head.bias` [1], fp32, both zero at the start of a run. It trains with the LoRA
 * weights (the training step treats its two tensors as two more parameters: gradient
 * clipping and the optimizer cover them), and it is saved beside the adapter as
 * `value_head.safetensors`, in the output folder and in every checkpoint.
 *
 * A value head is kept as a map of its two tensors by key, so it joins the LoRA weights'
 * map when the step runs (`withValueHead`) and leaves it afterwards (`splitValueHead`).
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { readSafetensorsHeader, readTensorBytes, toFloat32 } from '../model/safetensors.js';
import { f32Tensors, writeSafetensorsAtomic } from './files.js';
import type { LoraWeights } from './training-step.js';

export const VALUE_HEAD_WEIGHT = 'value_head.weight';
export const VALUE_HEAD_BIAS = 'value_head.bias';
export const VALUE_HEAD_FILE = 'value_head.safetensors';

/** The two tensors by key. */
export type ValueHead = Map<string, Float32Array>;

export function isValueHeadKey(key: string): boolean {
  return key === VALUE_HEAD_WEIGHT || key === VALUE_HEAD_BIAS;
}

export function valueHeadShapes(hiddenSize: number): Map<string, number[]> {
  return new Map([[VALUE_HEAD_WEIGHT, [1, hiddenSize]], [VALUE_HEAD_BIAS, [1]]]);
}

/** A new value head: zero weight and bias, so every value starts at 0. */
export function zeroValueHead(hiddenSize: number): ValueHead {
  return new Map([[VALUE_HEAD_WEIGHT, new Float32Array(hiddenSize)], [VALUE_HEAD_BIAS, new Float32Array(1)]]);
}

/** The LoRA weights and the value head as the step's one map of parameters. */
export function withValueHead(weights: LoraWeights, valueHead: ValueHead | undefined): LoraWeights {
  return valueHead ? new Map([...weights, ...valueHead]) : weights;
}

/** The step's parameters split back into LoRA weights and value head (undefined when it has none). */
export function splitValueHead(params: LoraWeights): { weights: LoraWeights; valueHead?: ValueHead } {
  if (!params.has(VALUE_HEAD_WEIGHT)) return { weights: params };
  const weights: LoraWeights = new Map(), valueHead: ValueHead = new Map();
  for (const [k, v] of params) (isValueHeadKey(k) ? valueHead : weights).set(k, v);
  return { weights, valueHead };
}

export function writeValueHead(dir: string, valueHead: ValueHead): void {
  const hidden = valueHead.get(VALUE_HEAD_WEIGHT)!.length;
  writeSafetensorsAtomic(path.join(dir, VALUE_HEAD_FILE), f32Tensors(valueHead, valueHeadShapes(hidden)), { format: 'pt' });
}

/** The value head saved in `dir`, checked against the model's hidden size; null when the folder has none. */
export function readValueHead(dir: string, hiddenSize: number): ValueHead | null {
  const file = path.join(dir, VALUE_HEAD_FILE);
  if (!fs.existsSync(file)) return null;
  const shapes = valueHeadShapes(hiddenSize);
  const out: ValueHead = new Map();
  for (const e of readSafetensorsHeader(file).tensors) {
    const shape = shapes.get(e.name);
    if (!shape) throw new UserError(`${file}: unexpected tensor '${e.name}' (a value head holds ${VALUE_HEAD_WEIGHT} and ${VALUE_HEAD_BIAS})`);
    if (e.shape.join() !== shape.join()) throw new UserError(`${file}: ${e.name} is [${e.shape}], but this model needs [${shape}]`);
    out.set(e.name, toFloat32(readTensorBytes(e), e.dtype, `${file}: ${e.name}`).slice());
  }
  for (const key of shapes.keys()) if (!out.has(key)) throw new UserError(`${file}: missing ${key}`);
  return out;
}

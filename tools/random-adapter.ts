// An adapter whose B is far from zero (uniform in ±bScale), so the adapted model really differs
// from the base: A as initLora makes it from `seed`, B drawn from seed + 1. The model tests and
// benches that run live adapter weights share it.
import type { ModelConfig } from '../src-main/model/hf-checkpoint.js';
import { loraBKey, loraSpecs, type LoraShape } from '../src-main/model/lora-inputs.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { initLora } from '../src-main/train/lora.js';

export function randomAdapter(config: ModelConfig, lora: LoraShape, seed: number, bScale = 0.3): Map<string, Float32Array> {
  const specs = loraSpecs(config, lora.targets);
  const weights = initLora(specs, lora.r, seed);
  const rand = seededRandom(seed + 1);
  for (const spec of specs) weights.get(loraBKey(spec))!.forEach((_, i, b) => (b[i] = (rand() * 2 - 1) * bScale));
  return weights;
}

/**
 * Gemma 2's soft-capping, c·tanh(x / c): attention's scaled scores (c = 50) and the logits
 * (c = 30) bent smoothly into (−c, c) (ModelConfig.gemma; ./gemma-config.ts). Near 0 it is x;
 * its slope is 1 − tanh²(x / c), which the chunked head (./chunked-head.ts) needs by hand, as a
 * function of the capped value z: 1 − (z / c)².
 */
import type { GraphBuilder } from '../graph/ir.js';

/** x soft-capped at `cap`, or x itself without one. */
export function softcap(b: GraphBuilder, x: string, cap: number | undefined): string {
  return cap ? b.mul(b.tanh(b.mul(x, b.scalar(1 / cap))), b.scalar(cap)) : x;
}

/** d softcap / dx at the capped value z = softcap(x): 1 − (z / cap)². */
export function softcapSlope(b: GraphBuilder, capped: string, cap: number): string {
  const t = b.mul(capped, b.scalar(1 / cap));
  return b.sub(b.scalar(1), b.mul(t, t));
}

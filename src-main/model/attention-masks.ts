/**
 * The decoder's additive attention masks, [B, 1, 1, T, S]: 0 where a query may look, a large
 * negative number elsewhere. Computed in the graph from its inputs, upstream of every weight, so
 * autodiff prunes them.
 *
 * Keys and queries are slots: the S positions of attention_mask (past and current tokens), the
 * queries being the last T of them or, over a written decode cache, `write_slots`. Causality is
 * by slot (a later slot is never an earlier token). A sliding window (Gemma 3's and OLMo 3's sliding layers) is
 * by position, which is not the slot: a batch's decode cache leaves padding between a row's
 * tokens. Each slot's position is counted from the mask (real tokens before it, as
 * ./cache-slots.ts positionIdsFromMask numbers the position_ids the caller feeds).
 */
import type { GraphBuilder } from '../graph/ir.js';

/** Masking bias: finite, so a fully masked (padding) row softmaxes to a harmless uniform row, not NaN. */
const MASKED = -1e9;

export interface AttentionMasks {
  /** Causal over real tokens: every layer's, but a sliding one's. */
  causal: string;
  /** Causal and within `slidingWindow` positions (with a window only). */
  sliding?: string;
}

export function attentionMasks(b: GraphBuilder, attentionMask: string, seqLen: string, writeSlots: string | undefined, slidingWindow?: number): AttentionMasks {
  const totalLen = b.gather(b.shape(attentionMask), b.scalar(1, 'int64'), 0);
  const one = b.scalar(1, 'int64');
  const keyIdx = b.range(b.scalar(0, 'int64'), totalLen, one, ['S']);
  const queryIdx = writeSlots ?? b.range(b.sub(totalLen, seqLen), totalLen, one, ['T']); // the queries' slots
  const causal = b.lessOrEqual(b.unsqueeze(keyIdx, [0]), b.unsqueeze(queryIdx, [1])); // [T, S]
  const notPadding = b.unsqueeze(b.cast(attentionMask, 'bool'), [1]); // [B, 1, S]
  const allowed = b.and(b.unsqueeze(causal, [0]), notPadding); // [B, T, S]
  const bias = (mask: string) => b.unsqueeze(b.where(mask, b.scalar(0), b.scalar(MASKED)), [1, 2]); // [B, 1, 1, T, S]
  if (slidingWindow === undefined) return { causal: bias(allowed) };
  // Position of each slot: the real tokens up to it, less one (a padding slot's is never read).
  const [counted] = b.op('CumSum', [attentionMask, b.scalar(1, 'int64')], {}, 1, [{ dtype: 'int64', shape: b.shapeOf(attentionMask) }]);
  const keyPositions = b.sub(counted!, one); // [B, S]
  const queryPositions = b.gather(keyPositions, queryIdx, 1); // [B, T]
  const distance = b.sub(b.unsqueeze(queryPositions, [2]), b.unsqueeze(keyPositions, [1])); // [B, T, S]
  const near = b.less(distance, b.scalar(slidingWindow, 'int64'));
  return { causal: bias(allowed), sliding: bias(b.and(allowed, near)) };
}

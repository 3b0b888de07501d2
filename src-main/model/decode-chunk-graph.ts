/**
 * The decode chunk graph (docs/design.md §Devices, "Decoding in chunks on CUDA"): the generate
 * graph's decoder inside an ONNX Loop that samples each next token in the graph and feeds it
 * back, so the keys and values stay in the device's memory for a whole chunk of tokens. A run
 * takes the host cache once and gives back the chunk's tokens, their log-probs and the keys and
 * values of what it fed; the generate graph, run once a token, took the whole cache every token.
 *
 * Inputs: the generate graph's (input_ids, attention_mask, position_ids, past_key_<i>,
 * past_value_<i>; the tokens not yet in the cache and the cache), and
 *   steps        int64 []      the most tokens to sample (the Loop's trip count)
 *   uniforms     float64 [M, B] per step and row, the draw the host sampler would make
 *                              (./sampling.ts: one per sampled token)
 *   temperature, top_p  float64 []  the sampler's settings (temperature 0: greedy)
 *   stop_ids     int64 [S]     tokens that end a row (S ≥ 1; -1 for none)
 *   budget       int64 [B]     tokens each row may still sample in this run
 * Outputs:
 *   tokens           int64 [B, K]    the sampled tokens, K ≤ steps: the loop ends early once every
 *                                    row has sampled a stop token or spent its budget
 *   token_logprobs   float32 [B, K]  each one's log-prob at temperature 1 (./sampling.ts)
 *   new_key_<i>, new_value_<i>  float32 [B, kvHeads, T + K - 1, headDim]  the keys and values of
 *                                    the input tokens and of every sampled token but the last,
 *                                    which the next run feeds
 * A row that ended goes on sampling until the chunk ends; the caller reads its tokens up to
 * its end only.
 */
import { GraphBuilder, int, type Graph } from '../graph/ir.js';
import { buildDecoder, type DecoderOptions } from './decoder.js';
import type { WeightSource } from './weight-source.js';

export type ChunkGraphOptions = Omit<DecoderOptions, 'output' | 'kvCache' | 'halfCache' | 'inference'>;

/** The largest int64 Slice end, read as "to the end". */
const TO_END = Number.MAX_SAFE_INTEGER;

export function decodeChunkGraph(weights: WeightSource, options: ChunkGraphOptions, name = 'decode_chunk'): Graph {
  const b = new GraphBuilder(name);
  const c = weights.config;
  const L = c.numLayers;
  const steps = b.input('steps', 'int64', []);
  const uniforms = b.input('uniforms', 'float64', ['M', 'B']);
  const temperature = b.input('temperature', 'float64', []);
  const topP = b.input('top_p', 'float64', []);
  const stopIds = b.input('stop_ids', 'int64', ['S']);
  const budget = b.input('budget', 'int64', ['B']);
  const outerInputs = b.graph.inputs.length;

  // ---- The body: one token through the decoder, the next one sampled -------------------------
  const iteration = b.input('step_index', 'int64', []);
  const condition = b.input('step_condition', 'bool', []);
  const done = b.input('step_done', 'bool', ['B']);
  const tokensSoFar = b.input('step_tokens', 'int64', ['B', 'K']);
  const logprobsSoFar = b.input('step_token_logprobs', 'float32', ['B', 'K']);
  const fedKeys = Array.from({ length: L }, (_, i) => b.input(`step_new_key_${i}`, 'float32', ['B', c.numKvHeads, 'F', c.headDim]));
  const fedValues = Array.from({ length: L }, (_, i) => b.input(`step_new_value_${i}`, 'float32', ['B', c.numKvHeads, 'F', c.headDim]));
  const d = buildDecoder(b, weights, { ...options, output: 'last_logprobs', kvCache: 'appended', inference: true });
  const logprobs = d.output; // [B, V]
  const token = sampleInGraph(b, logprobs, c.vocabSize, { uniform: b.unsqueeze(b.gather(uniforms, iteration, 0), [1]), temperature, topP });
  const one = b.scalar(1, 'int64');
  const ones = b.expand(one, b.shape(token), ['B', 1]);
  const stopped = b.greater(b.reduceSum(b.cast(b.equal(token, stopIds), 'int64'), [1], false), b.scalar(0, 'int64'));
  const spent = b.lessOrEqual(budget, b.add(iteration, one));
  const nextDone = b.op('Or', [done, b.op('Or', [stopped, spent], {}, 1, [{ dtype: 'bool', shape: ['B'] }])[0]!], {}, 1, [{ dtype: 'bool', shape: ['B'] }])[0]!;
  const allDone = b.op('ReduceMin', [b.cast(nextDone, 'int64')], { keepdims: int(0) }, 1, [{ dtype: 'int64', shape: [] }])[0]!;
  // The decoder's inputs, carried from step to step, with the values they take next.
  const carried: [string, string][] = [
    [d.inputIds, token],
    [d.attentionMask, b.concat([d.attentionMask, ones], 1)],
    [d.positionIds, b.add(b.slice(d.positionIds, [-1], [TO_END], [1]), one)],
    ...d.pastKeys.map((past, i): [string, string] => [past, b.concat([past, d.newKeys[i]!], 2)]),
    ...d.pastValues.map((past, i): [string, string] => [past, b.concat([past, d.newValues[i]!], 2)]),
    [done, nextDone],
    [tokensSoFar, b.concat([tokensSoFar, token], 1)],
    [logprobsSoFar, b.concat([logprobsSoFar, b.gatherElements(logprobs, token, 1)], 1)],
    ...fedKeys.map((fed, i): [string, string] => [fed, b.concat([fed, d.newKeys[i]!], 2)]),
    ...fedValues.map((fed, i): [string, string] => [fed, b.concat([fed, d.newValues[i]!], 2)]),
  ];
  const nextCondition = b.equal(allDone, b.scalar(0, 'int64'));
  const carriedTypes = carried.map(([from]) => ({ dtype: b.dtypeOf(from) }));

  // The body's nodes leave the outer graph; the weights and constants it made stay there, read
  // from the outer scope. The decoder's inputs take body names, so the outer graph's inputs can
  // have the generate graph's names (the host cache's feeds serve both).
  const bodyNodes = b.graph.nodes.splice(0);
  const made = b.graph.inputs.splice(outerInputs);
  const bodyInputNames = new Set([iteration, condition, ...carried.map(([from]) => from)]);
  b.graph.inputs.push(...made.filter((v) => !bodyInputNames.has(v.name))); // the LoRA inputs: outer
  const renamed = new Map(d.pastKeys.concat(d.pastValues, [d.inputIds, d.attentionMask, d.positionIds]).map((n) => [n, `step_${n}`]));
  const rename = (n: string) => renamed.get(n) ?? n;
  for (const node of bodyNodes) node.inputs = node.inputs.map(rename);
  // A carried value's shape changes from step to step (the cache grows): its dtype only.
  const carriedValue = (n: string) => ({ name: rename(n), dtype: b.dtypeOf(n) });
  const scalar = (n: string) => ({ ...carriedValue(n), shape: [] });
  const body: Graph = {
    name: `${name}_step`,
    inputs: [scalar(iteration), scalar(condition), ...carried.map(([from]) => carriedValue(from))],
    outputs: [scalar(nextCondition), ...carried.map(([, to]) => carriedValue(to))],
    nodes: bodyNodes,
    initializers: new Map(),
    values: b.graph.values,
  };
  for (const [from, to] of renamed) {
    b.graph.values.set(to, { ...b.graph.values.get(from)!, name: to });
    b.graph.values.delete(from);
  }

  // ---- The outer graph: the generate graph's inputs, the loop, its results -----------------
  const ids = b.input('input_ids', 'int64', ['B', 'T']);
  const mask = b.input('attention_mask', 'int64', ['B', 'S']);
  const positions = b.input('position_ids', 'int64', ['B', 'T']);
  const pastKeys = Array.from({ length: L }, (_, i) => b.input(`past_key_${i}`, 'float32', ['B', c.numKvHeads, 'P', c.headDim]));
  const pastValues = Array.from({ length: L }, (_, i) => b.input(`past_value_${i}`, 'float32', ['B', c.numKvHeads, 'P', c.headDim]));
  const noTokens = b.slice(ids, [0], [0], [1]); // [B, 0]
  const nothingFed = (past: string) => b.slice(past, [0], [0], [2]); // [B, kvHeads, 0, headDim]
  const start = [
    ids, mask, positions, ...pastKeys, ...pastValues,
    b.lessOrEqual(budget, b.scalar(0, 'int64')),
    noTokens, b.cast(noTokens, 'float32'),
    ...pastKeys.map(nothingFed), ...pastValues.map(nothingFed),
  ];
  const alwaysStart = b.constant({ dtype: 'bool', dims: [], data: Uint8Array.from([1]) });
  const finals = b.op('Loop', [steps, alwaysStart, ...start], { body: { kind: 'graph', value: body } }, start.length, carriedTypes);
  const at = (k: number) => finals[k]!;
  const first = 3 + 2 * L + 1; // tokens, after ids, mask, positions, the past and done
  b.output(b.identityAs(at(first), 'tokens'));
  b.output(b.identityAs(at(first + 1), 'token_logprobs'));
  for (let i = 0; i < L; i++) b.output(b.identityAs(at(first + 2 + i), `new_key_${i}`));
  for (let i = 0; i < L; i++) b.output(b.identityAs(at(first + 2 + L + i), `new_value_${i}`));
  return b.graph;
}

/**
 * The next token of each row from `logprobs` [B, V], as ./sampling.ts's sampleToken picks it
 * with the draw `uniform` [B, 1]: the first largest log-prob at temperature 0; else weights
 * exp((logprob - max) / temperature) in float64, and the token where the draw falls in their
 * running total, over every token in vocabulary order, or over the nucleus (the fewest most
 * likely tokens whose share reaches top-p, most likely first, ties by lower id: TopK's order).
 * In float64 the totals differ from the host's sums by rounding only, so a draw picks another
 * token only when it falls within some 1e-16 of a boundary.
 */
function sampleInGraph(b: GraphBuilder, logprobs: string, vocab: number, s: { uniform: string; temperature: string; topP: string }): string {
  const i64 = (x: string) => b.cast(x, 'int64');
  const last = b.scalar(-1, 'int64');
  const countAtMost = (running: string, limit: string) => b.reduceSum(i64(b.lessOrEqual(running, limit)), [-1], true); // [B, 1]
  const greedy = b.op('ArgMax', [logprobs], { axis: int(-1), keepdims: int(1) }, 1, [{ dtype: 'int64', shape: ['B', 1] }])[0]!;
  const wide = b.cast(logprobs, 'float64');
  const top = b.op('ReduceMax', [wide, b.int64s([-1])], { keepdims: int(1) }, 1, [{ dtype: 'float64', shape: ['B', 1] }])[0]!;
  const zero = b.cast(b.scalar(0), 'float64');
  const sampling = b.greater(s.temperature, zero);
  // At temperature 0 the division is by 1: its result is not used, and stays finite.
  const divisor = b.where(sampling, s.temperature, b.cast(b.scalar(1), 'float64'));
  const weights = b.exp(b.div(b.sub(wide, top), divisor));
  const total = b.reduceSum(weights, [-1], true);
  const cumsum = (x: string) => b.op('CumSum', [x, last], {}, 1, [{ dtype: 'float64', shape: b.shapeOf(x) }])[0]!;
  const atMostLast = (x: string, limit: number | string) => b.min(x, typeof limit === 'number' ? b.scalar(limit, 'int64') : limit);
  // Every token, in vocabulary order.
  const anyToken = atMostLast(countAtMost(cumsum(weights), b.mul(s.uniform, total)), vocab - 1);
  // The nucleus.
  const [sorted, order] = b.op('TopK', [weights, b.int64s([vocab])], { axis: int(-1), largest: int(1), sorted: int(1) }, 2,
    [{ dtype: 'float64', shape: ['B', vocab] }, { dtype: 'int64', shape: ['B', vocab] }]) as [string, string];
  const running = cumsum(sorted);
  const below = b.reduceSum(i64(b.less(running, b.mul(s.topP, total))), [-1], true);
  const lastKept = atMostLast(below, vocab - 1); // the nucleus is sorted[0 ..= lastKept]
  const mass = b.gatherElements(running, lastKept, 1);
  const inNucleus = b.gatherElements(order, atMostLast(countAtMost(running, b.mul(s.uniform, mass)), lastKept), 1);
  const nucleus = b.less(s.topP, b.cast(b.scalar(1), 'float64'));
  return b.where(sampling, b.where(nucleus, inNucleus, anyToken), greedy);
}

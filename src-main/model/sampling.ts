/**
 * Choosing the next token: greedy, temperature and nucleus (top-p) sampling with a seeded
 * PRNG, so a seed reproduces a generation exactly.
 */

/** mulberry32: tiny, fast and well mixed; returns floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Picks a token from `logprobs`, the model's log-softmax at temperature 1 (the generate graph
 * computes it). Returns the token with its log-prob as given, before top-p: the policy's
 * log-prob that training needs.
 */
export function sampleToken(logprobs: Float32Array, temperature: number, topP: number, rand: () => number): { token: number; logprob: number } {
  const V = logprobs.length;
  let argmax = 0;
  for (let i = 1; i < V; i++) if (logprobs[i]! > logprobs[argmax]!) argmax = i;
  if (temperature <= 0) return { token: argmax, logprob: logprobs[argmax]! };

  // Unnormalised weights at the temperature: the draw is scaled by their total instead.
  const max = logprobs[argmax]!;
  const weights = new Float64Array(V);
  let total = 0;
  for (let i = 0; i < V; i++) total += weights[i] = Math.exp((logprobs[i]! - max) / temperature);
  const token = topP < 1 ? drawFromNucleus(weights, total, topP, rand) : drawFrom(weights, total, rand);
  return { token, logprob: logprobs[token]! };
}

/** A draw from every token in proportion to `weights` (summing to `total`); no candidate list (a large vocabulary makes one costly). */
function drawFrom(weights: Float64Array, total: number, rand: () => number): number {
  let r = rand() * total;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return weights.length - 1;
}

/** A draw from the smallest set of most likely tokens whose share of `total` reaches `topP`. */
function drawFromNucleus(weights: Float64Array, total: number, topP: number, rand: () => number): number {
  // Tokens below (1 - topP) / V of the total carry at most 1 - topP of the mass together, so
  // the nucleus lies within the rest: only those need sorting.
  const floor = ((1 - topP) / weights.length) * total;
  const candidates: number[] = [];
  for (let i = 0; i < weights.length; i++) if (weights[i]! >= floor) candidates.push(i);
  candidates.sort((a, b) => weights[b]! - weights[a]! || a - b);
  let mass = 0;
  let keep = 0;
  while (keep < candidates.length && mass < topP * total) mass += weights[candidates[keep++]!]!;
  const nucleus = candidates.slice(0, Math.max(1, keep));
  let r = rand() * mass;
  for (const i of nucleus) {
    r -= weights[i]!;
    if (r < 0) return i;
  }
  return nucleus[nucleus.length - 1]!;
}

/**
 * The seeds of n sequences asked for with one seed (generate --n, /v1's n): seed, seed + 1, …
 * (mod 2³²), so sequence j is what a single run with seed + j gives. No seed: a random start.
 */
export function sequenceSeeds(seed: number | undefined, n: number): number[] {
  const start = seed ?? Math.floor(Math.random() * 2 ** 32);
  return Array.from({ length: n }, (_, j) => (start + j) >>> 0);
}

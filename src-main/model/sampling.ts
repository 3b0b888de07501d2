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
 * Picks a token from `logits`. Returns it with its log-prob under the model itself
 * (log_softmax at temperature 1, before top-p): the policy's log-prob that training needs.
 */
export function sampleToken(logits: Float32Array, temperature: number, topP: number, rand: () => number): { token: number; logprob: number } {
  const V = logits.length;
  let argmax = 0;
  for (let i = 1; i < V; i++) if (logits[i]! > logits[argmax]!) argmax = i;
  const max = logits[argmax]!;
  let sum = 0;
  for (let i = 0; i < V; i++) sum += Math.exp(logits[i]! - max);
  const logZ = max + Math.log(sum);
  if (temperature <= 0) return { token: argmax, logprob: max - logZ };

  const probs = new Float64Array(V);
  let total = 0;
  for (let i = 0; i < V; i++) total += probs[i] = Math.exp((logits[i]! - max) / temperature);
  for (let i = 0; i < V; i++) probs[i]! /= total;

  let candidates: number[];
  if (topP < 1) {
    // Tokens below (1 - topP) / V carry at most 1 - topP of the mass together, so the
    // nucleus lies within the rest: only those need sorting.
    const floor = (1 - topP) / V;
    candidates = [];
    for (let i = 0; i < V; i++) if (probs[i]! >= floor) candidates.push(i);
    candidates.sort((a, b) => probs[b]! - probs[a]! || a - b);
    let mass = 0;
    let keep = 0;
    while (keep < candidates.length && mass < topP) mass += probs[candidates[keep++]!]!;
    candidates = candidates.slice(0, Math.max(1, keep));
  } else {
    candidates = Array.from({ length: V }, (_, i) => i);
  }
  let mass = 0;
  for (const i of candidates) mass += probs[i]!;
  let r = rand() * mass;
  let token = candidates[candidates.length - 1]!;
  for (const i of candidates) {
    r -= probs[i]!;
    if (r < 0) {
      token = i;
      break;
    }
  }
  return { token, logprob: logits[token]! - logZ };
}

/**
 * The seeds of n sequences asked for with one seed (generate --n, /v1's n): seed, seed + 1, …
 * (mod 2³²), so sequence j is what a single run with seed + j gives. No seed: a random start.
 */
export function sequenceSeeds(seed: number | undefined, n: number): number[] {
  const start = seed ?? Math.floor(Math.random() * 2 ** 32);
  return Array.from({ length: n }, (_, j) => (start + j) >>> 0);
}

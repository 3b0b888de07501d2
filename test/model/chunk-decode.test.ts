// Decoding in chunks through the decode chunk graph (docs/design.md §Devices, "Decoding in
// chunks on CUDA"; src-main/model/decode-chunk-graph.ts, chunk-decode.ts): the graph samples, so
// a run decodes several tokens and the cache crosses to the device once a chunk. CUDA decodes
// this way by default; here it runs on the CPU (decodeInGraph: true) against the token-by-token
// loop, which samples on the host: the same tokens and finish reasons for greedy decoding,
// sampling at a temperature and nucleus sampling with each sequence's own seed, stop ids, stop
// strings, budgets that end rows inside a chunk, prompts prefilled in pieces, a LoRA adapter, int4 and fp16 bases,
// and the Stop button; the log-probs within float rounding. Where CUDA's provider is installed
// (the GPU session's tests, bench/gpu-session.sh) the same comparison runs there.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ModelEngine, type BatchPrompt, type GenerateOptions } from '../../src-main/model/inference-engine.js';
import type { GeneratedTokens } from '../../src-main/model/batch-decode.js';
import { CHUNK_TOKENS } from '../../src-main/model/chunk-decode.js';
import type { LoraShape } from '../../src-main/model/lora-inputs.js';
import { randomAdapter } from '../../tools/random-adapter.js';
import { CudaUnavailableError } from '../../src-main/model/cuda-errors.js';
import type { Device } from '../../src-main/model/ort-session.js';

const STORIES = path.resolve('resources/models/stories260K');

/** Both engines' results for each option set: [in the graph, on the host]. */
async function bothWays(prompts: BatchPrompt[], optionSets: Omit<GenerateOptions, 'seed'>[], device: Device = 'cpu'): Promise<[GeneratedTokens[][], GeneratedTokens[][]][]> {
  const engines = [true, false].map((decodeInGraph) => ModelEngine.open(STORIES, { device, graphCache: false, prefillPiece: 3, decodeInGraph }));
  try {
    const out: [GeneratedTokens[][], GeneratedTokens[][]][] = [];
    for (const options of optionSets) out.push([await engines[0]!.generateBatch(prompts, options), await engines[1]!.generateBatch(prompts, options)]);
    return out;
  } finally {
    for (const e of engines) await e.close();
  }
}

function expectSame(inGraph: GeneratedTokens[], onHost: GeneratedTokens[]): void {
  expect(inGraph.map((s) => s.tokens)).toEqual(onHost.map((s) => s.tokens));
  expect(inGraph.map((s) => s.finishReason)).toEqual(onHost.map((s) => s.finishReason));
  expect(inGraph.map((s) => s.text)).toEqual(onHost.map((s) => s.text));
  inGraph.forEach((s, i) => s.logprobs.forEach((x, k) => expect(Math.abs(x - onHost[i]!.logprobs[k]!)).toBeLessThan(1e-4)));
}

describe('decoding in chunks, sampling in the graph', () => {
  // Prompts of 9, 2 and 1 tokens (prefilled in pieces of 3, and not at all), several seeds of
  // one prompt, and budgets that end rows inside a chunk (1, then 4, then 16 tokens a run).
  const prompts: BatchPrompt[] = [
    { promptIds: [1, 403, 407, 261, 378, 300, 301, 302, 303], seeds: [1, 2, 3], maxNewTokens: 2 * CHUNK_TOKENS + 9 },
    { promptIds: [1, 500], seeds: [7], maxNewTokens: 11 },
    { promptIds: [1], seeds: [9] },
  ];

  it('gives the host loop\'s tokens: greedy, at a temperature, in a nucleus; stop ids and stop strings', async () => {
    const runs = await bothWays(prompts, [
      { temperature: 0, stopTokenIds: [] },
      { temperature: 0.8, stopTokenIds: [], maxNewTokens: 30 },
      { temperature: 1, topP: 0.9, stopTokenIds: [] },
      { temperature: 1.3, topP: 0.5, stopStrings: ['.'], stopTokenIds: [] },
      { temperature: 1, stopTokenIds: [261, 300, 378] },
    ]);
    for (const [inGraph, onHost] of runs) expectSame(inGraph.flat(), onHost.flat());
    const [greedy, , , stopString, stopIds] = runs.map(([inGraph]) => inGraph.flat());
    expect(greedy!.map((s) => s.tokens.length)).toEqual([41, 41, 41, 11, 256]);
    expect(new Set(greedy!.slice(0, 3).map((s) => s.tokens.join()))).toHaveProperty('size', 1); // greedy: every seed the same
    expect(stopString!.filter((s) => s.finishReason === 'stop').length).toBeGreaterThan(0);
    expect(stopIds!.filter((s) => s.finishReason === 'eos').length).toBeGreaterThan(0);
    // The sampled rows really differ from seed to seed, so the draws are each sequence's own.
    expect(new Set(runs[1]![0][0]!.map((s) => s.tokens.join())).size).toBe(3);
  });

  it('runs an adapter\'s weights, as the host loop does', async () => {
    const lora: LoraShape = { r: 2, alpha: 4, targets: ['q', 'v', 'down'] };
    const weights = randomAdapter(ModelEngine.open(STORIES).config, lora, 3);
    const stories = [];
    for (const decodeInGraph of [true, false]) {
      const engine = ModelEngine.open(STORIES, { device: 'cpu', graphCache: false, lora, decodeInGraph });
      try {
        const base = await engine.generate([1, 403, 407], { maxNewTokens: 20, stopTokenIds: [] });
        engine.setLora(weights);
        stories.push({ base, adapted: await engine.generate([1, 403, 407], { maxNewTokens: 20, temperature: 0.7, seed: 5, stopTokenIds: [] }) });
      } finally {
        await engine.close();
      }
    }
    expectSame([stories[0]!.base, stories[0]!.adapted], [stories[1]!.base, stories[1]!.adapted]);
    expect(stories[0]!.adapted.tokens).not.toEqual(stories[0]!.base.tokens);
  });

  it('runs a quantised base (int4, MatMulNBits inside the loop) and an fp16 one (CUDA\'s default) as the host loop does', async () => {
    for (const base of [{ quantize: 'int4' as const }, { precision: 'fp16' as const }]) {
      const stories = [];
      for (const decodeInGraph of [true, false]) {
        const engine = ModelEngine.open(STORIES, { device: 'cpu', graphCache: false, ...base, decodeInGraph });
        try {
          stories.push(await engine.generate([1, 403, 407], { maxNewTokens: 24, temperature: 0.9, seed: 4, stopTokenIds: [] }));
        } finally {
          await engine.close();
        }
      }
      expectSame([stories[0]!], [stories[1]!]);
    }
  });

  it('stops at the end of the chunk it is on when the Stop flag goes up', async () => {
    const engine = ModelEngine.open(STORIES, { device: 'cpu', graphCache: false, decodeInGraph: true });
    try {
      const stopFlag = new Int32Array(new SharedArrayBuffer(4));
      const seen: number[] = [];
      const out = await engine.generate([1, 403], { maxNewTokens: 200, stopTokenIds: [], stopFlag }, (token) => {
        seen.push(token);
        if (seen.length === 3) Atomics.store(stopFlag, 0, 1);
      });
      expect(out.finishReason).toBe('cancelled');
      expect(out.tokens).toEqual(seen);
      expect(out.tokens).toHaveLength(5); // runs of 1 and 4 tokens: the flag rose inside the second
    } finally {
      await engine.close();
    }
  });

  it('on CUDA, where its provider is installed, gives the token-by-token loop\'s tokens there too (elsewhere, the one-line refusal)', async () => {
    const runs = await bothWays(prompts, [
      { temperature: 0, stopTokenIds: [] },
      { temperature: 0.8, stopTokenIds: [], maxNewTokens: 30 },
      { temperature: 1, topP: 0.9, stopTokenIds: [] },
    ], 'cuda').catch((err: Error) => err);
    if (runs instanceof Error) {
      expect(runs).toBeInstanceOf(CudaUnavailableError);
      console.info(`chunk-decode: no CUDA here, so only the CPU's chunks are checked: ${runs.message}`);
      return;
    }
    for (const [inGraph, onHost] of runs) expectSame(inGraph.flat(), onHost.flat());
  });
});

// The longest chat a load answers within (src-shared/inference-memory.ts fittingChat,
// InferenceFit.contextTokens, LocalModel.maxPositions): the decode cache grows with the chat, so
// a model whose form fits a 4,096-token chat may not hold one of its 40,960 positions. The memory
// the machine has is set with HINDSIGHT_MEMORY_BUDGET, between a tiny model's estimates at two
// chat lengths; a longer prompt is then refused in one line (the Chat page, /v1, generate)
// instead of growing the cache into swap. On the CPU such a load holds its cache in fp16
// (test/model/half-cache.test.ts), so the budget here is an fp16 cache's.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateInferenceMemory, fitsRoom, fittingChat, type InferenceLoad, type InferenceRoom } from '../../src-shared/inference-memory.js';
import { SLOT_BLOCK, type ModelShape } from '../../src-shared/train-memory.js';
import type { ChatState } from '../../src-shared/chat-api.js';
import { ChatService } from '../../src-main/api/chat-service.js';
import { EventHub } from '../../src-main/workspace/event-hub.js';
import { fitInference } from '../../src-main/model/inference-fit.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { batchParts, LocalModel } from '../../src-main/model/local-model.js';
import { startOpenAiServer } from '../../src-main/openai/server.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { runCli } from '../helpers/cli.js';
import { withEnv } from '../helpers/env.js';

const GiB = 2 ** 30;
/** The longest chat with an fp32 cache. */
const fittingContext = (shape: ModelShape, load: InferenceLoad, room: InferenceRoom) => fittingChat(shape, load, room, false).tokens;
const QWEN3_8B: ModelShape = { hiddenSize: 4096, intermediateSize: 12288, numLayers: 36, numHeads: 32, numKvHeads: 8, headDim: 128, vocabSize: 151936, tieWordEmbeddings: false, maxPositionEmbeddings: 40960 };

describe('the longest chat that fits', () => {
  it('Qwen3-8B in int4 on a 16 GB laptop holds a chat of some 14,000 tokens in fp32, not its 40,960; with room, all of them', () => {
    const room = { host: 10 * GiB, gpu: null };
    const tokens = fittingContext(QWEN3_8B, { quantize: 'int4' }, room);
    expect(tokens).toBeGreaterThan(8192);
    expect(tokens).toBeLessThan(16384);
    expect(tokens % SLOT_BLOCK).toBe(0);
    expect(fitsRoom(QWEN3_8B, { quantize: 'int4', contextTokens: tokens }, room)).toBe(true);
    expect(fitsRoom(QWEN3_8B, { quantize: 'int4', contextTokens: tokens + SLOT_BLOCK }, room)).toBe(false);
    // A 40,960-token prefill's attention scores count too (a piece of 512 queries over every key).
    expect(fittingContext(QWEN3_8B, { quantize: 'int4' }, { host: 48 * GiB, gpu: null })).toBe(40960);
    // Two engines (the Chat page's two sides) each hold a cache: a shorter chat fits.
    expect(fittingContext(QWEN3_8B, { quantize: 'int4', engines: 2 }, room)).toBeLessThan(tokens);
  });
});

describe('a batch in parts that fit', () => {
  it('parts rows in order, a prompt\'s seeds too, where a part would outgrow what fits', () => {
    const fits = (rows: number, slots: number) => rows * slots <= 100;
    const item = (length: number, seeds: number[]) => ({ promptIds: Array.from({ length: length - 10 }, () => 1), maxNewTokens: 10, seeds });
    const parts = batchParts([item(30, [1, 2, 3, 4]), item(50, [5])], fits);
    expect(parts.map((p) => p.map((x) => [x.index, x.item.seeds]))).toEqual([[[0, [1, 2, 3]]], [[0, [4]], [1, [5]]]]);
    // A row longer than the budget alone is still a part of its own; everything fits: one part.
    expect(batchParts([item(200, [1, 2])], fits).map((p) => p.map((x) => x.item.seeds))).toEqual([[[1]], [[2]]]);
    expect(batchParts([item(30, [1, 2]), item(20, [3])], () => true)).toHaveLength(1);
  });
});

describe('a load that answers within a shorter chat than its positions', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inference-context-'));
  let model: string;
  /** The budget that holds an 8,192-token chat with an fp16 cache, and not one block more. */
  let budget: string;
  beforeAll(() => {
    model = writeTinyModel(path.join(dir, 'model'), { family: 'qwen3', numLayers: 4, maxPositions: 65536 }).dir; // 4 layers: an fp16 cache, read a layer at a time as fp32, saves memory from 3
    budget = String(Math.ceil(estimateInferenceMemory(modelShape(model), { quantize: 'none', contextTokens: 8192, cachePrecision: 'fp16' }).total));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  /** A user message of `tokens` tokens (the tiny tokenizer has no merge for "xx"). */
  const longMessage = (tokens: number) => 'x'.repeat(tokens);

  it('says how long a chat fits and why, and holds every prompt to it; ignoring memory, the positions', async () => {
    const fit = fitInference(model, { quantize: 'auto', device: 'cpu' }, { HINDSIGHT_MEMORY_BUDGET: budget });
    expect([fit.quantize, fit.note, fit.context.tokens, fit.context.cachePrecision]).toEqual(['none', null, 8192, 'fp16']);
    expect(fit.context.note).toMatch(/^chats up to 8,192 tokens of the model's 65,536 \(its cache in fp16\): a longer chat's cache would not fit; this machine has \d+ MB available of .* \(HINDSIGHT_MEMORY_BUDGET\)$/);
    // A caller that opens its engine itself (no device: an fp32 cache) holds a shorter chat.
    const fp32 = fitInference(model, { quantize: 'auto' }, { HINDSIGHT_MEMORY_BUDGET: budget }).context;
    expect([fp32.cachePrecision, fp32.tokens < 8192]).toEqual(['fp32', true]);
    expect([fit.context.fitsBatch(1, 8192), fit.context.fitsBatch(2, 8192), fit.context.fitsBatch(2, 2048)]).toEqual([true, false, true]);
    const ignoring = fitInference(model, { quantize: 'auto', ignoreMemory: true }, { HINDSIGHT_MEMORY_BUDGET: budget }).context;
    expect([ignoring.tokens, ignoring.note, ignoring.fitsBatch(64, 65536)]).toEqual([65536, null, true]);
    const loaded = await withEnv('HINDSIGHT_MEMORY_BUDGET', budget, () => LocalModel.load(model));
    try {
      expect([loaded.maxPositions, loaded.contextNote]).toEqual([8192, fit.context.note]);
      // Its checked form carries the limit to a load beside it (the served model's swap to a new adapter).
      expect(loaded.checkedForm).toMatchObject({ quantize: 'none', context: { tokens: 8192, note: fit.context.note, cachePrecision: 'fp16' } });
    } finally {
      await loaded.close();
    }
  });

  it('generates a batch whose rows would not fit together in parts, with the same sequences', async () => {
    const loaded = await withEnv('HINDSIGHT_MEMORY_BUDGET', budget, () => LocalModel.load(model));
    const calls: number[] = [];
    const worker = (loaded as unknown as { worker: { call: (method: string, args: unknown[], onEvent?: unknown) => Promise<unknown> } }).worker;
    const call = worker.call.bind(worker);
    worker.call = (method, args, onEvent) => {
      if (method === 'generateBatch') calls.push((args[0] as { seeds: number[] }[]).reduce((a, p) => a + p.seeds.length, 0));
      return call(method, args, onEvent);
    };
    try {
      // Three rows of some 3,000 slots: two fit the 8,192 the memory holds, three do not.
      const prompt = longMessage(3000);
      const streamed: number[] = [];
      const [batch] = await loaded.generateBatch([{ prompt, seeds: [1, 2, 3] }], { maxNewTokens: 4, temperature: 1, onToken: (sequence) => streamed.push(sequence) });
      expect(calls).toEqual([2, 1]);
      expect(new Set(streamed)).toEqual(new Set([0, 1, 2]));
      for (const [j, seed] of [1, 2, 3].entries()) expect(batch![j]!.tokens).toEqual((await loaded.generate(prompt, { maxNewTokens: 4, temperature: 1, seed })).tokens);
    } finally {
      await loaded.close();
    }
  });

  it('generate prints the limit, /v1 refuses a longer prompt as context_length_exceeded and logs why', async () => {
    const cli = await withEnv('HINDSIGHT_MEMORY_BUDGET', budget, () => runCli('generate', '--model', model, '--prompt', 'Hi', '--max-new-tokens', '2'));
    expect(cli.code).toBe(0);
    expect(cli.stderr).toMatch(/^note: chats up to 8,192 tokens of the model's 65,536 \(its cache in fp16\): /m);
    const lines: string[] = [];
    await withEnv('HINDSIGHT_MEMORY_BUDGET', budget, async () => {
      const server = await startOpenAiServer({ modelDir: model, token: 't', port: 0, log: (line) => lines.push(line) });
      const ask = (content: string) => fetch(`${server.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { Authorization: 'Bearer t', 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: 2 }),
      });
      try {
        expect((await ask('Hi')).status).toBe(200);
        const refused = await ask(longMessage(9000));
        expect(refused.status).toBe(400);
        const body = (await refused.json()) as { error: { code: string; message: string } };
        expect(body.error.code).toBe('context_length_exceeded');
        expect(body.error.message).toMatch(/^This model's maximum context length is 8192 tokens\. However, your messages resulted in \d+ tokens/);
      } finally {
        await server.close();
      }
    });
    expect(lines).toEqual([expect.stringMatching(/^model: chats up to 8,192 tokens of the model's 65,536 \(its cache in fp16\): /)]);
  });

  it('the Chat page says it above the columns, and a conversation past it is refused in its words', async () => {
    const events = new EventHub();
    const service = new ChatService(events, { capture: () => null });
    const turnEnds = (turn: () => number) => new Promise<ChatState>((resolve) => {
      const off = events.subscribe((name, payload) => {
        const state = payload as ChatState;
        if (name === 'chat.progress' && state.turn === turn() && state.state !== 'running') {
          off();
          resolve(state);
        }
      });
    });
    const sampling = { temperature: 0, topP: 1, maxTokens: 2 };
    const chat = (content: string) => withEnv('HINDSIGHT_MEMORY_BUDGET', budget, async () => {
      let turn = 0;
      const done = turnEnds(() => turn);
      turn = (await service.start({ modelDir: model, adapterDir: null, base: [{ role: 'user', content }], sampling })).turn;
      return done;
    });
    try {
      const short = await chat('Hi');
      expect(short.sides.map((s) => s.status)).toEqual(['done']);
      expect(short.contextNote).toMatch(/^chats up to 8,192 tokens of the model's 65,536 \(its cache in fp16\): /);
      // Each reply says how much of that the chat now takes.
      expect(short.sides[0]!.context).toEqual({ used: expect.any(Number), limit: 8192 });
      expect(short.sides[0]!.context!.used).toBeGreaterThan(short.sides[0]!.tokens!);
      const long = await chat(longMessage(9000));
      expect(long.sides.map((s) => [s.status, s.error])).toEqual([['failed', "This conversation no longer fits the 8192 tokens this machine's memory holds for it: press Clear to start a new chat."]]);
    } finally {
      await service.end();
    }
  });
});

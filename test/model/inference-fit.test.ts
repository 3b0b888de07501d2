/**
 * A model's load for inference fits the machine's memory (src-shared/inference-memory.ts,
 * src-main/model/inference-fit.ts): the estimate against the decode peaks docs/benchmarks.md
 * quotes; `auto` takes the most exact form that fits (fp32, int8, int4) and says why it left
 * fp32; a form asked for that does not fit, and a model that fits in no form, are refused in
 * one line before anything loads; --ignore-memory loads anyway. Memory is made short with
 * HINDSIGHT_MEMORY_BUDGET, set between the estimates of two forms of a small random model.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cudaInferenceBytes, estimateInferenceMemory, fittingForm, INFERENCE_CONTEXT, INFERENCE_MARGIN } from '../../src-shared/inference-memory.js';
import { ChatService } from '../../src-main/api/chat-service.js';
import { EventHub } from '../../src-main/workspace/event-hub.js';
import type { ModelShape } from '../../src-shared/train-memory.js';
import type { Quantize } from '../../src-shared/training.js';
import { fitInference } from '../../src-main/model/inference-fit.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { startOpenAiServer } from '../../src-main/openai/server.js';
import { createOpenAiHandler } from '../../src-main/openai/handler.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { runCli } from '../helpers/cli.js';
import { withEnv } from '../helpers/env.js';
import { judgeRunNotes } from '../../src-shared/judge-notes.js';

const GiB = 2 ** 30;

/** The shapes of docs/benchmarks.md's *Real-size models* rows. */
const LLAMA_125M: ModelShape = { hiddenSize: 768, intermediateSize: 2048, numLayers: 12, numHeads: 12, numKvHeads: 4, headDim: 64, vocabSize: 32000, tieWordEmbeddings: false, maxPositionEmbeddings: 4096 };
const QWEN_1_5B: ModelShape = { hiddenSize: 1536, intermediateSize: 8960, numLayers: 28, numHeads: 12, numKvHeads: 2, headDim: 128, vocabSize: 151936, tieWordEmbeddings: true, maxPositionEmbeddings: 32768 };
const QWEN3_0_6B: ModelShape = { hiddenSize: 1024, intermediateSize: 3072, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, vocabSize: 151936, tieWordEmbeddings: true, maxPositionEmbeddings: 40960 };
const QWEN3_8B: ModelShape = { hiddenSize: 4096, intermediateSize: 12288, numLayers: 36, numHeads: 32, numKvHeads: 8, headDim: 128, vocabSize: 151936, tieWordEmbeddings: false, maxPositionEmbeddings: 40960 };

describe('the inference estimate', () => {
  // Peak RSS of greedy decoding, 128 tokens after 32 (160 slots), and the 0.6B shape's 8,192-token prefill.
  const measured: [string, ModelShape, Quantize, number, number][] = [
    ['125M fp32', LLAMA_125M, 'none', 160, 0.62], ['125M int8', LLAMA_125M, 'int8', 160, 0.31], ['125M int4', LLAMA_125M, 'int4', 160, 0.27],
    ['1.5B fp32', QWEN_1_5B, 'none', 160, 6.90], ['1.5B int8', QWEN_1_5B, 'int8', 160, 2.06], ['1.5B int4', QWEN_1_5B, 'int4', 160, 1.45],
    ['0.6B fp32, 8,192-token prompt', QWEN3_0_6B, 'none', 8193, 6.07],
  ];
  it.each(measured)('%s is within the margin of its measured peak', (_, shape, quantize, contextTokens, gib) => {
    const e = estimateInferenceMemory(shape, { quantize, contextTokens });
    expect(Math.abs(e.total / GiB / gib - 1)).toBeLessThanOrEqual(INFERENCE_MARGIN);
    expect(e.total).toBe(e.weights + e.cache + e.runtime + e.activations);
  });

  it('puts Qwen3-8B on a 16 GB laptop in int4, a 32 GB one in int8, and fp32 only past 33 GB', () => {
    // What each has available with a desktop and a browser open.
    const at = (gib: number) => fittingForm(QWEN3_8B, { host: gib * GiB, gpu: null });
    expect([at(6), at(10), at(24), at(40)]).toEqual([null, 'int4', 'int8', 'none']);
    const int4 = estimateInferenceMemory(QWEN3_8B, { quantize: 'int4' }).total / GiB;
    expect(int4).toBeGreaterThan(5);
    expect(int4).toBeLessThan(10);
  });

  it('prices the cache by rows and context (capped at the model\'s positions), engines each with their own, the weights once', () => {
    const one = estimateInferenceMemory(QWEN3_0_6B, { quantize: 'int4' });
    const two = estimateInferenceMemory(QWEN3_0_6B, { quantize: 'int4', engines: 2 });
    expect(two.weights).toBe(one.weights);
    expect(two.cache).toBe(2 * one.cache);
    expect(two.runtime).toBe(2 * one.runtime);
    expect(two.activations).toBe(2 * one.activations);
    const short = { ...QWEN3_0_6B, maxPositionEmbeddings: 1024 };
    expect(estimateInferenceMemory(short, { quantize: 'int4' }).cache).toBe(estimateInferenceMemory(QWEN3_0_6B, { quantize: 'int4', contextTokens: 1024 }).cache);
    expect(estimateInferenceMemory(QWEN3_0_6B, { quantize: 'int4', rows: 3 }).cache).toBe(3 * one.cache);
    expect(INFERENCE_CONTEXT).toBe(4096);
    const lora = estimateInferenceMemory(QWEN3_0_6B, { quantize: 'int4', loraParameters: 1000 });
    expect(lora.weights - one.weights).toBe(4000);
  });
});

describe('loading within the memory there is', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inference-fit-'));
  let model: string;
  /** The bytes a load of the model needs in each form. */
  let need: Record<Quantize, number>;
  const between = (a: number, b: number) => String(Math.floor((a + b) / 2));
  beforeAll(() => {
    // Big enough that its weights, not the runtime, part the forms: 4 layers of hidden 256.
    model = writeTinyModel(path.join(dir, 'model'), { family: 'qwen3', hiddenSize: 256, numLayers: 4, numHeads: 4, numKvHeads: 2, headDim: 64, intermediateSize: 1024, vocabSize: 2048 }).dir;
    const shape = modelShape(model);
    need = Object.fromEntries((['none', 'int8', 'int4'] as const).map((q) => [q, estimateInferenceMemory(shape, { quantize: q }).total])) as Record<Quantize, number>;
    expect(need.none).toBeGreaterThan(need.int8);
    expect(need.int8).toBeGreaterThan(need.int4);
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('auto keeps fp32 where it fits, and says nothing', () => {
    const fit = fitInference(model, { quantize: 'auto' }, { HINDSIGHT_MEMORY_BUDGET: String(Math.ceil(need.none)) });
    expect([fit.quantize, fit.note]).toEqual(['none', null]);
  });

  it('auto takes int8, then int4, as memory shrinks, and says why', () => {
    const int8 = fitInference(model, { quantize: 'auto' }, { HINDSIGHT_MEMORY_BUDGET: between(need.none, need.int8) });
    expect(int8.quantize).toBe('int8');
    expect(int8.note).toMatch(/^int8 weights: fp32 would need about \d+ MB; this machine has \d+ MB available of .* \(HINDSIGHT_MEMORY_BUDGET\)$/);
    const int4 = fitInference(model, { quantize: 'auto' }, { HINDSIGHT_MEMORY_BUDGET: between(need.int8, need.int4) });
    expect(int4.quantize).toBe('int4');
    expect(int4.note).toMatch(/^int4 weights: fp32 would need about \d+ MB and int8 about \d+ MB; /);
  });

  it('refuses in one line where not even int4 fits, unless memory is to be ignored', () => {
    const env = { HINDSIGHT_MEMORY_BUDGET: String(need.int4 - 1) };
    expect(() => fitInference(model, { quantize: 'auto' }, env)).toThrow(/^model needs about \d+ MB to answer even with int4 weights, but this machine has \d+ MB available of .*: close other programs or use a smaller model\.$/);
    expect(() => fitInference(model, { quantize: 'auto', reader: 'cli' }, env)).toThrow(/, or --ignore-memory to load it anyway\.$/);
    expect(fitInference(model, { quantize: 'auto', ignoreMemory: true }, env).quantize).toBe('int4');
  });

  it('refuses a form asked for that does not fit, naming those that would', () => {
    const env = { HINDSIGHT_MEMORY_BUDGET: between(need.none, need.int8) };
    expect(() => fitInference(model, { quantize: 'none', reader: 'cli' }, env)).toThrow(
      /^model with fp32 weights needs about \d+ MB, but this machine has \d+ MB available of .*: try --quantize int8 \(about \d+ MB\) or --quantize int4 \(about \d+ MB\), or --ignore-memory to load it anyway\.$/,
    );
    expect(fitInference(model, { quantize: 'int8' }, env).quantize).toBe('int8');
    expect(fitInference(model, { quantize: 'none', ignoreMemory: true }, env).quantize).toBe('none');
  });

  it('prices engines loaded together: where one fits in fp32, two do not', () => {
    const env = { HINDSIGHT_MEMORY_BUDGET: String(Math.ceil(need.none)) };
    expect(fitInference(model, { quantize: 'auto' }, env).quantize).toBe('none');
    expect(() => fitInference(model, { quantize: 'none', engines: 2 }, env)).toThrow(/^model with fp32 weights needs about/);
  });

  it('on CUDA fits the card too: fp16 unless it does not fit there, saying which memory was short', () => {
    const shape = modelShape(model);
    const card = (quantize: Quantize) => cudaInferenceBytes(shape, { quantize, precision: 'fp16' });
    expect(card('none')).toBeGreaterThan(card('int8'));
    const gpu = { name: 'NVIDIA Test Card', totalBytes: 16 * GiB, freeBytes: Math.floor((card('none') + card('int8')) / 2) };
    const plenty = { HINDSIGHT_MEMORY_BUDGET: String(GiB) };
    const fit = fitInference(model, { quantize: 'auto', precision: 'fp16', gpu }, plenty);
    expect(fit.quantize).toBe('int8');
    expect(fit.note).toMatch(/^int8 weights: fp16 would need about \d+ MB on the GPU; the GPU \(NVIDIA Test Card\) has \d+ MB free of 16\.0 GB$/);
    expect(() => fitInference(model, { quantize: 'none', precision: 'fp16', gpu, reader: 'cli' }, plenty)).toThrow(
      /^model with fp16 weights needs about \d+ MB on the GPU, but the GPU \(NVIDIA Test Card\) has \d+ MB free of 16\.0 GB: try --quantize int8 \(about \d+ MB\) or --quantize int4 \(about \d+ MB\), or --ignore-memory to load it anyway\.$/,
    );
    // With room on the card, the host's memory still counts.
    const roomy = { ...gpu, freeBytes: 16 * GiB };
    expect(fitInference(model, { quantize: 'auto', precision: 'fp16', gpu: roomy }, plenty).quantize).toBe('none');
    const hostFp16 = estimateInferenceMemory(shape, { quantize: 'none', precision: 'fp16' }).total;
    expect(hostFp16).toBeGreaterThan(need.int8);
    expect(fitInference(model, { quantize: 'auto', precision: 'fp16', gpu: roomy }, { HINDSIGHT_MEMORY_BUDGET: between(hostFp16, need.int8) }).quantize).toBe('int8');
  });

  it('the Chat page on CUDA reads the card (nvidia-smi) before choosing the form both sides load in', async () => {
    const shape = modelShape(model);
    const card = (quantize: Quantize) => cudaInferenceBytes(shape, { quantize, precision: 'fp16' });
    const smi = fs.mkdtempSync(path.join(dir, 'smi-'));
    const freeMiB = Math.floor((card('none') + card('int8')) / 2 / 2 ** 20);
    fs.writeFileSync(path.join(smi, 'nvidia-smi'), `#!/bin/sh\necho 'NVIDIA Test Card, 16384, ${freeMiB}'\n`, { mode: 0o755 });
    const service = new ChatService(new EventHub(), { capture: () => null });
    try {
      const state = await withEnv('PATH', `${smi}${path.delimiter}${process.env.PATH}`, () => service.start({
        modelDir: model, adapterDir: null, device: 'cuda', base: [{ role: 'user', content: 'hi' }], sampling: { temperature: 0, topP: 1, maxTokens: 2, seed: 1 },
      }));
      expect(state.weightsNote).toMatch(/^int8 weights: fp16 would need about \d+ MB on the GPU; the GPU \(NVIDIA Test Card\) has \d+ MB free of 16\.0 GB$/);
    } finally {
      await service.end(); // the side itself fails here, with no CUDA provider installed
    }
  });

  it('LocalModel.load answers in the form that fits, and generate says so', async () => {
    await withEnv('HINDSIGHT_MEMORY_BUDGET', between(need.int8, need.int4), async () => {
      const loaded = await LocalModel.load(model);
      try {
        expect(loaded.quantize).toBe('int4');
        expect(loaded.weightsNote).toMatch(/^int4 weights: /);
        const out = await loaded.generate('hello', { maxNewTokens: 4, chatTemplate: false });
        expect(out.tokens.length).toBeGreaterThan(0);
      } finally {
        await loaded.close();
      }
      const cli = await runCli('generate', '--model', model, '--prompt', 'hello', '--max-new-tokens', '3', '--no-chat-template', '--json');
      expect(cli.code).toBe(0);
      expect(cli.json().quantize).toBe('int4');
      expect(cli.stderr).toMatch(/^note: int4 weights: fp32 would need about/m);
      const refused = await runCli('generate', '--model', model, '--prompt', 'hello', '--quantize', 'none');
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/model with fp32 weights needs about \d+ MB, but .*: try --quantize int4 \(about \d+ MB\), or --ignore-memory to load it anyway\./);
      const forced = await runCli('generate', '--model', model, '--prompt', 'hello', '--quantize', 'none', '--ignore-memory', '--max-new-tokens', '2', '--no-chat-template', '--json');
      expect([forced.code, forced.json().quantize]).toEqual([0, 'none']);
    });
  });

  it('a swap to a new adapter loads in the served model\'s form, without counting its weights again', async () => {
    const adapterDir = path.join(dir, 'adapter');
    const config = Checkpoint.open(model).config;
    const lora = { r: 2, alpha: 4, targets: ['q', 'v'] as ('q' | 'v')[] };
    const specs = loraSpecs(config, lora.targets);
    writeAdapter(adapterDir, { lora, specs, weights: initLora(specs, lora.r, 1), baseModel: model });
    const lines: string[] = [];
    let adapter: string | null = null;
    const handler = createOpenAiHandler({ modelDir: () => model, adapterDir: () => adapter, log: (line) => lines.push(line) });
    const server = http.createServer((req, res) => void handler.route(req, res, () => null));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const ask = async () => (await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    })).json();
    try {
      await withEnv('HINDSIGHT_MEMORY_BUDGET', between(need.none, need.int8), async () => expect((await ask()).model).toBe('model'));
      expect(lines).toEqual([expect.stringMatching(/^model: int8 weights: /)]);
      // Memory left for no second copy: checked afresh, the adapter's load would be refused.
      await withEnv('HINDSIGHT_MEMORY_BUDGET', String(need.int4 - 1), async () => {
        await handler.preload(model, adapterDir);
        adapter = adapterDir;
        expect((await ask()).model).toBe('model+adapter');
      });
      expect(lines).toHaveLength(1);
    } finally {
      server.close();
      await handler.close();
    }
  });

  it('the local judge says which form its votes come from', async () => {
    const judged = await withEnv('HINDSIGHT_MEMORY_BUDGET', between(need.none, need.int8), () =>
      runCli('judge', '--backend', 'local', '--model', model, '--db', path.join(dir, 'judge.db'), '--json'));
    expect(judged.code).toBe(0);
    expect(judged.stderr).toMatch(/^note: the judge's int8 weights: fp32 would need about \d+ MB; /m);
    // Its labels name the form (an fp32 run of the same model is another judge: it judges them
    // again), and the summary, the app's toast included (judgeRunNotes), says why.
    const summary = JSON.parse(judged.stdout);
    expect(summary).toMatchObject({ backend: 'local', model: 'model (int8)' });
    expect(judgeRunNotes(summary)).toEqual([expect.stringMatching(/^the judge's int8 weights: fp32 would need about \d+ MB; /)]);
    const roomy = await withEnv('HINDSIGHT_MEMORY_BUDGET', String(Math.ceil(need.none)), () =>
      runCli('judge', '--backend', 'local', '--model', model, '--db', path.join(dir, 'judge.db'), '--json'));
    expect(JSON.parse(roomy.stdout)).toMatchObject({ model: 'model', weightsNote: null });
  });

  it('the endpoint answers from the form that fits, and logs which', async () => {
    const lines: string[] = [];
    await withEnv('HINDSIGHT_MEMORY_BUDGET', between(need.none, need.int8), async () => {
      const server = await startOpenAiServer({ modelDir: model, token: 't', port: 0, log: (line) => lines.push(line) });
      try {
        const res = await fetch(`${server.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: { Authorization: 'Bearer t', 'Content-Type': 'application/json' },
          body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }),
        });
        expect(res.status).toBe(200);
      } finally {
        await server.close();
      }
    });
    expect(lines).toEqual([expect.stringMatching(/^model: int8 weights: fp32 would need about \d+ MB; /)]);
  });
});

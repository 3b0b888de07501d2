// The worker-backed runtime and the score/generate commands.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalModel } from '../../src-main/model/local-model.js';
import { runCli as cli } from '../helpers/cli.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const STORIES = path.resolve('resources/models/stories260K');
const reference = JSON.parse(fs.readFileSync(path.join(STORIES, 'reference_greedy.json'), 'utf8')) as { bos_greedy_200_ids: number[]; bos_greedy_200_text: string };
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-runtime-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('LocalModel runtime', () => {
  let model: LocalModel;
  beforeAll(async () => {
    model = await LocalModel.load(STORIES);
  });
  afterAll(() => model?.close());

  it('keeps the caller’s event loop free while the model works', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const started = Date.now();
    await model.generate([1], { maxNewTokens: 120, useKvCache: false, stopTokenIds: [] });
    clearInterval(timer);
    const elapsed = Date.now() - started;
    // A blocked loop would tick ~0 times; allow heavy jitter from a busy machine.
    expect(ticks).toBeGreaterThan(Math.min(20, elapsed / 40));
  });

  it('stops at a stop string, at an EOS id, and streams tokens', async () => {
    const byStop = await model.generate([1], { maxNewTokens: 100, stopStrings: ['Lily'] });
    expect(byStop.finishReason).toBe('stop');
    expect(byStop.text).toBe('Once upon a time, there was a little girl named ');
    const eos = reference.bos_greedy_200_ids[6]!;
    const streamed: number[] = [];
    const byEos = await model.generate([1], { maxNewTokens: 100, stopTokenIds: [eos], onToken: (t) => streamed.push(t) });
    expect(byEos.finishReason).toBe('eos');
    expect(byEos.tokens).toEqual(reference.bos_greedy_200_ids.slice(1, 7));
    expect(streamed).toEqual(byEos.tokens);
    const byLength = await model.generate([1], { maxNewTokens: 3 });
    expect(byLength).toMatchObject({ finishReason: 'length', tokens: reference.bos_greedy_200_ids.slice(1, 4) });
  });

  it('runs several models at once and after others closed', async () => {
    const a = writeTinyModel(path.join(root, 'a'), { family: 'llama' });
    const m1 = await LocalModel.load(a.dir);
    const m2 = await LocalModel.load(a.dir, { externalData: true }); // through .onnx + .onnx.data on disk
    const row = { inputIds: m1.tokenizer.encode('the cat sat on the wall'), responseStart: 2 };
    const [x, y] = await Promise.all([m1.score([row]), m2.score([row])]);
    expect(y).toEqual(x);
    await m1.close();
    await m2.close();
    await expect(m1.score([row])).rejects.toThrow(/closed/);
    const m3 = await LocalModel.load(a.dir);
    expect(await m3.score([row])).toEqual(x);
    await m3.close();
  });
});

describe('score and generate commands', () => {
  it('score reads both input forms and writes one log-prob list per line', async () => {
    const tiny = writeTinyModel(path.join(root, 'cli'), { family: 'qwen3', tie: true, dtype: 'BF16' });
    const input = path.join(root, 'in.jsonl');
    const outFile = path.join(root, 'out.jsonl');
    fs.writeFileSync(input, [
      JSON.stringify({ messages: [{ role: 'user', content: 'hi there' }], response: 'hello' }),
      JSON.stringify({ input_ids: [5, 6, 7, 8, 9], response_start: 3 }),
      '',
    ].join('\n'));
    const r = await cli('score', '--model', tiny.dir, '--input', input, '--out', outFile, '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ rows: 2, execution_provider: 'cpu', out: outFile });
    const lines = fs.readFileSync(outFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { logprobs: number[] });
    const m = await LocalModel.load(tiny.dir);
    try {
      const span = m.tokenizer.encodeResponse([{ role: 'user', content: 'hi there' }], 'hello');
      const expected = await m.score([span, { inputIds: [5, 6, 7, 8, 9], responseStart: 3 }]);
      expect(lines.map((l) => l.logprobs)).toEqual(expected);
      expect(lines[1]!.logprobs).toHaveLength(2);
    } finally {
      await m.close();
    }
  });

  it('score names the bad line of its input', async () => {
    const tiny = path.join(root, 'cli');
    const input = path.join(root, 'bad.jsonl');
    fs.writeFileSync(input, '{"input_ids":[1,2],"response_start":1}\n{"messages":"nope"}\n');
    const r = await cli('score', '--model', tiny, '--input', input, '--out', path.join(root, 'o.jsonl'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${input}:2: expected {"context":[…],"response":"…"} (a samples export line), {"messages":[…],"response":"…"} or {"input_ids":[…],"response_start":k}`);
  });

  it('generate --json through the real binary reports the EP and the story', () => {
    const out = execFileSync('node', ['bin/hindsight.mjs', 'generate', '--model', STORIES, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '20', '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const j = JSON.parse(out);
    expect(j.execution_provider).toBe('cpu');
    expect(j.tokens).toEqual(reference.bos_greedy_200_ids.slice(5, 25));
    expect(j.text.length).toBeGreaterThan(40);
    expect(reference.bos_greedy_200_text).toContain(j.text.trim());
    expect(j.logprobs).toHaveLength(20);
  });

  it('score --quantize int8 notes its drift from fp32 on stderr and in --json', async () => {
    const tiny = path.join(root, 'cli');
    const input = path.join(root, 'q.jsonl');
    fs.writeFileSync(input, JSON.stringify({ input_ids: [5, 6, 7, 8, 9], response_start: 2 }) + '\n');
    const r = await cli('score', '--model', tiny, '--input', input, '--out', path.join(root, 'q-out.jsonl'), '--quantize', 'int8', '--json');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/note: --quantize int8: log-probs drift from fp32 by max \d+\.\d{4}, mean \d+\.\d{4} nats per token \(measured on a fixed \d+-token text\)/);
    const j = r.json();
    expect(j.quantize).toBe('int8');
    expect(j.drift.max_abs).toBeGreaterThanOrEqual(j.drift.mean_abs);
    const plain = await cli('score', '--model', tiny, '--input', input, '--out', path.join(root, 'q-out2.jsonl'));
    expect(plain.stderr).not.toContain('drift');
    expect((await cli('score', '--model', tiny, '--input', input, '--out', path.join(root, 'x.jsonl'), '--quantize', 'int3')).code).toBe(2);
  });

  it('generate --n 3 prints three replies, reply j the one --seed S+j gives alone; --quantize none is the golden story', async () => {
    const args = ['generate', '--model', STORIES, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '12', '--temperature', '0.9'];
    const batch = await cli(...args, '--n', '3', '--seed', '40', '--json');
    expect(batch.code).toBe(0);
    const replies = batch.json().replies as { tokens: number[] }[];
    expect(replies).toHaveLength(3);
    for (let j = 0; j < 3; j++) {
      const alone = await cli(...args, '--seed', String(40 + j), '--json');
      expect(replies[j]!.tokens).toEqual(alone.json().tokens);
    }
    expect(batch.stderr).toMatch(/3 replies, \d+ tokens in/);
    const text = await cli(...args, '--n', '2', '--seed', '1');
    expect(text.stdout.split('\n').filter((l) => l.startsWith('--- reply '))).toEqual(['--- reply 1 ---', '--- reply 2 ---']);
    const golden = await cli('generate', '--model', STORIES, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '20', '--quantize', 'none', '--json');
    expect(golden.json().tokens).toEqual(reference.bos_greedy_200_ids.slice(5, 25));
  });

  it('usage errors exit 2, user errors exit 1 with one line', async () => {
    expect((await cli('generate', '--model', STORIES, '--prompt', 'x', '--device', 'tpu')).code).toBe(2);
    expect((await cli('generate', '--model', STORIES, '--prompt', 'x', '--top-p', '0')).code).toBe(2);
    expect((await cli('score', '--model', STORIES)).code).toBe(2);
    const missing = await cli('generate', '--model', path.join(root, 'none'), '--prompt', 'x');
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
  });
});

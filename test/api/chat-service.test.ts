// The Chat page's service on the demo model: bad input refused in one line before anything
// loads; a turn streams the base and an adapter side by side with one seed; models stay loaded
// between turns and close when the model changes or the chat ends; Stop ends both replies
// mid-way; both sides answer in the form of the weights that fits them together; and a turn
// is recorded through live capture only while capture is on.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatState } from '../../src-shared/chat-api.js';
import { ChatService, type ChatModelLoader } from '../../src-main/api/chat-service.js';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { seededRandom } from '../../src-main/model/sampling.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { loadAdaptedModel } from '../../src-main/train/adapted-model.js';
import { initLora, loraBKey, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { EventHub } from '../../src-main/workspace/event-hub.js';
import { TEST_TIMEOUT_MS, waitUntil } from '../helpers/deadlines.js';
import { withEnv } from '../helpers/env.js';
import { estimateInferenceMemory } from '../../src-shared/inference-memory.js';
import type { Quantize } from '../../src-shared/training.js';
import { modelShape } from '../../src-main/model/host-memory.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const DEMO_MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-chat-'));
const adapterDir = path.join(dir, 'kind-run');
const SAMPLING = { temperature: 0.8, topP: 0.95, maxTokens: 40, seed: 7 };
const hello = [{ role: 'user' as const, content: 'Tell me a story about a cat.' }];

/** A trained-looking adapter (B ≠ 0), so its replies differ from the base's. */
function writeTestAdapter(seed: number): void {
  const config = Checkpoint.open(DEMO_MODEL).config;
  const lora = { r: 4, alpha: 8, targets: ['q', 'v', 'down'] as ('q' | 'v' | 'down')[] };
  const specs = loraSpecs(config, lora.targets);
  const weights = initLora(specs, lora.r, 1);
  const rand = seededRandom(seed);
  for (const s of specs) weights.get(loraBKey(s))!.forEach((_, i, b) => (b[i] = (rand() - 0.5) * 0.5));
  writeAdapter(adapterDir, { lora, specs, weights, baseModel: DEMO_MODEL });
}

/** A service over the real loader that counts loads and closes. */
function chatService(events = new EventHub()) {
  const counts = { loads: 0, closes: 0, forms: [] as Quantize[] };
  const load: ChatModelLoader = async (modelDir, adapter, device, form) => {
    counts.loads++;
    const model = await loadAdaptedModel(modelDir, adapter, { device, ...form, ignoreMemory: true });
    counts.forms.push(model.quantize);
    const close = model.close.bind(model);
    model.close = () => {
      counts.closes++;
      return close();
    };
    return model;
  };
  return { service: new ChatService(events, { capture: () => null, load }), counts, events };
}

/** The state the turn `turn` ends in, from the events. */
function finished(events: EventHub, turn: () => number): Promise<ChatState> {
  return new Promise((resolve) => {
    const off = events.subscribe((name, payload) => {
      const state = payload as ChatState;
      if (name === 'chat.progress' && state.turn === turn() && state.state !== 'running') {
        off();
        resolve(state);
      }
    });
  });
}

beforeAll(() => writeTestAdapter(2));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the chat service', { timeout: TEST_TIMEOUT_MS }, () => {
  it('refuses a bad model, adapter or transcript with one line, before loading anything', async () => {
    const { service, counts } = chatService();
    const start = (patch: Record<string, unknown>) => () => service.start({ modelDir: DEMO_MODEL, adapterDir, base: hello, adapter: hello, sampling: SAMPLING, ...patch });
    const emptyFolder = fs.mkdtempSync(path.join(dir, 'empty-'));
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ modelDir: path.join(dir, 'nowhere') }, /^The model folder .*nowhere does not exist\.$/],
      [{ modelDir: emptyFolder }, /is not a model folder: it has no config\.json\.$/],
      [{ adapterDir: path.join(dir, 'gone') }, /^The adapter folder .*gone does not exist \(moved or deleted\?\); choose another adapter or none\.$/],
      [{ adapterDir: emptyFolder }, /is not a LoRA adapter folder: it has no adapter_config\.json\.$/],
      [{ adapter: undefined }, /needs the adapter side's messages too/],
      [{ base: [...hello, { role: 'assistant', content: 'Once.' }] }, /^The base side's messages must end with the user's new message\.$/],
    ];
    for (const [patch, message] of cases) {
      const err = await start(patch)().then(() => null, (e: unknown) => e as Error);
      expect(err?.message).toMatch(message);
      expect(err!.message).not.toContain('\n');
    }
    expect(counts.loads).toBe(0);
    expect(service.status().state).toBe('idle');
  });

  it('streams both sides with one seed, keeps the models between turns, and closes them when the model changes or the chat ends', async () => {
    const { service, counts, events } = chatService();
    const seen: ChatState[] = [];
    events.subscribe((_, payload) => seen.push(payload as ChatState));
    let turn = 0;
    const sampling = { ...SAMPLING, maxTokens: 300 };
    const started = await service.start({ modelDir: DEMO_MODEL, adapterDir, base: hello, adapter: hello, sampling });
    turn = started.turn;
    expect(started.state).toBe('running');
    expect(started.sides.map((s) => [s.side, s.name, s.status])).toEqual([['base', 'base', 'loading'], ['adapter', 'kind-run', 'loading']]);
    const first = await finished(events, () => turn);
    expect(first.state).toBe('done');
    expect(first.captured).toBe(false);
    const [base, adapter] = first.sides;
    for (const side of first.sides) {
      expect(side.status).toBe('done');
      expect(side.text.trim().length).toBeGreaterThan(0);
      // Streamed: some event showed this side part-way through its final text.
      expect(seen.some((s) => s.turn === turn && s.sides.some((x) => x.side === side.side && x.status === 'generating' && x.text.length > 0 && x.text.length < side.text.length && side.text.startsWith(x.text)))).toBe(true);
    }
    // The base side is exactly what the model gives alone with that seed; the adapter's weights change the reply.
    const alone = await LocalModel.load(DEMO_MODEL);
    const direct = await alone.generate(hello, { temperature: 0.8, topP: 0.95, seed: 7, maxNewTokens: 300 }).finally(() => alone.close());
    expect(base!.text).toBe(direct.content);
    expect(base!.tokens).toBe(direct.tokens.filter((t) => !alone.tokenizer.eosTokenIds.includes(t)).length);
    expect(adapter!.text).not.toBe(base!.text);
    expect(counts.loads).toBe(2);

    // The second message: each side continues its own transcript, on the models already loaded.
    const next = (reply: string) => [...hello, { role: 'assistant' as const, content: reply }, { role: 'user' as const, content: 'And then?' }];
    turn = (await service.start({ chatId: first.chatId!, modelDir: DEMO_MODEL, adapterDir, base: next(base!.text), adapter: next(adapter!.text), sampling: SAMPLING })).turn;
    const second = await finished(events, () => turn);
    expect(second.chatId).toBe(first.chatId);
    expect(second.sides.map((s) => s.status)).toEqual(['done', 'done']);
    expect(counts.loads).toBe(2);

    // Without the adapter, its model closes; the base stays.
    turn = (await service.start({ modelDir: DEMO_MODEL, adapterDir: null, base: hello, sampling: SAMPLING })).turn;
    const baseOnly = await finished(events, () => turn);
    expect(baseOnly.sides.map((s) => s.side)).toEqual(['base']);
    expect([counts.loads, counts.closes, service.loadedModels]).toEqual([2, 1, 1]);

    // An adapter retrained in the same folder is another model.
    turn = (await service.start({ modelDir: DEMO_MODEL, adapterDir, base: hello, adapter: hello, sampling: SAMPLING })).turn;
    await finished(events, () => turn);
    writeTestAdapter(3);
    turn = (await service.start({ modelDir: DEMO_MODEL, adapterDir, base: hello, adapter: hello, sampling: SAMPLING })).turn;
    const retrained = await finished(events, () => turn);
    expect(retrained.sides.map((s) => s.status)).toEqual(['done', 'done']);
    expect([counts.loads, counts.closes, service.loadedModels]).toEqual([4, 2, 2]);

    const ended = await service.end();
    expect(ended.state).toBe('idle');
    expect([counts.closes, service.loadedModels]).toEqual([4, 0]);
  });

  it('Stop ends both replies part-way, keeping what was written', async () => {
    const { service, events } = chatService();
    let turn = 0;
    // Stop as soon as any side shows text: the replies have hundreds of tokens still to go.
    events.subscribe((_, payload) => {
      const s = payload as ChatState;
      if (s.turn === turn && s.state === 'running' && s.sides.some((x) => x.text.length > 0)) service.stop();
    });
    const done = finished(events, () => turn);
    turn = (await service.start({ modelDir: DEMO_MODEL, adapterDir, base: hello, adapter: hello, sampling: { ...SAMPLING, maxTokens: 480 } })).turn;
    const stopped = await done;
    expect(stopped.state).toBe('stopped');
    const budget = Math.min(480, 512 - ChatTokenizer.load(DEMO_MODEL).encodeChat(hello, { addGenerationPrompt: true }).length);
    for (const side of stopped.sides) {
      expect(side.status).toBe('stopped');
      expect(side.tokens ?? 0).toBeLessThan(budget);
    }
    expect(stopped.sides.some((s) => s.text.length > 0)).toBe(true);
    await service.end();
  });

  it('answers both sides in one form that fits them together, says so, and refuses before loading where none fits', async () => {
    const shape = modelShape(DEMO_MODEL);
    const both = (quantize: Quantize) => estimateInferenceMemory(shape, { quantize, engines: 2 }).total;
    const { service, events, counts } = chatService();
    let turn = 0;
    const state = await withEnv('HINDSIGHT_MEMORY_BUDGET', String(Math.floor((both('none') + both('int8')) / 2)), async () => {
      const done = finished(events, () => turn);
      turn = (await service.start({ modelDir: DEMO_MODEL, adapterDir, base: hello, adapter: hello, sampling: SAMPLING })).turn;
      return done;
    });
    expect(state.sides.map((s) => s.status)).toEqual(['done', 'done']);
    expect(state.weightsNote).toMatch(/^int8 weights: fp32 would need about .*\(HINDSIGHT_MEMORY_BUDGET\)$/);
    expect(counts.forms).toEqual(['int8', 'int8']);
    await service.end();
    await withEnv('HINDSIGHT_MEMORY_BUDGET', String(Math.floor(both('int4') - 1)), async () => {
      await expect(service.start({ modelDir: DEMO_MODEL, adapterDir, base: hello, adapter: hello, sampling: SAMPLING })).rejects.toThrow(/needs about .* to answer even with int4 weights/);
    });
    expect(counts.loads).toBe(2);
  });

  it('a chat started while the last one ends keeps its models and finishes (Clear, then a message at once)', async () => {
    const { service, events, counts } = chatService();
    let turn = 0;
    const first = finished(events, () => turn);
    turn = (await service.start({ modelDir: DEMO_MODEL, adapterDir: null, base: hello, sampling: SAMPLING })).turn;
    await first;
    // The page's Clear (chatEnd) and its next message (chatStart) cross: the end awaits the last
    // turn, and the new chat starts before it goes on.
    const ending = service.end();
    const second = finished(events, () => turn);
    turn = (await service.start({ modelDir: DEMO_MODEL, adapterDir: null, base: hello, sampling: SAMPLING })).turn;
    await ending;
    const state = await second;
    expect(state.sides.map((s) => [s.status, s.error])).toEqual([['done', null]]);
    expect(counts.closes).toBe(0);
    await service.end();
    expect(counts.closes).toBe(1);
  });

  it('the engine stops on the flag after the token it is on', async () => {
    const engine = ModelEngine.open(DEMO_MODEL, { threads: 1 });
    try {
      const flag = new Int32Array(new SharedArrayBuffer(4));
      let seen = 0;
      const out = await engine.generate(engine.tokenizer.encode('Once upon a time', true), { maxNewTokens: 100, temperature: 0, stopFlag: flag }, () => {
        if (++seen === 5) Atomics.store(flag, 0, 1);
      });
      expect(out.finishReason).toBe('cancelled');
      expect(out.tokens).toHaveLength(5);
    } finally {
      await engine.close();
    }
  });
});

describe('the chat calls through serve, with live capture', { timeout: TEST_TIMEOUT_MS }, () => {
  let server: ServeHandle;
  const call = async <T>(name: string, input: unknown = {}): Promise<T> => {
    const res = await fetch(`${server.url}api/${name}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` },
      body: JSON.stringify(input),
    });
    const body = (await res.json()) as { ok: boolean; value: T; error?: { kind: string; message: string; field?: string } };
    if (!body.ok) throw Object.assign(new Error(body.error!.message), body.error);
    return body.value;
  };
  const turn = async (input: Record<string, unknown>): Promise<ChatState> => {
    const started = await call<ChatState>('chatStart', { modelDir: DEMO_MODEL, adapterDir, sampling: SAMPLING, ...input });
    return waitUntil('the chat turn to finish', async () => {
      const s = await call<ChatState>('chatStatus');
      return s.turn === started.turn && s.state !== 'running' ? s : null;
    });
  };
  const capturedSessions = async () => (await call<{ sessions: { id: string }[] }>('listSessions', {})).sessions.map((s) => s.id).filter((id) => id.startsWith('capture:chat:'));

  beforeAll(async () => {
    server = await serveApp({ dbPath: path.join(dir, 'chat.db'), port: 0, buildRenderer: false, capture: true });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('validates the input and names the field', async () => {
    await expect(call('chatStart', { modelDir: DEMO_MODEL, adapterDir: null, base: hello, sampling: { ...SAMPLING, topP: 0 } })).rejects.toMatchObject({ kind: 'validation', field: 'sampling.topP' });
    await expect(call('chatStart', { modelDir: DEMO_MODEL, adapterDir: null, base: [{ role: 'robot', content: 'hi' }], sampling: SAMPLING })).rejects.toMatchObject({ field: 'base[0].role' });
    await expect(call('chatStart', { modelDir: DEMO_MODEL, adapterDir: path.join(dir, 'gone'), base: hello, adapter: hello, sampling: SAMPLING })).rejects.toMatchObject({ kind: 'user' });
  });

  it('records each side as its own captured session while capture is on, and nothing once it is off', async () => {
    const first = await turn({ base: hello, adapter: hello });
    expect(first.captured).toBe(true);
    expect(first.sides.map((s) => s.status)).toEqual(['done', 'done']);
    const ids = [`capture:chat:${first.chatId}:base`, `capture:chat:${first.chatId}:adapter`];
    expect((await capturedSessions()).sort()).toEqual([...ids].sort());
    const [base, adapter] = first.sides;
    const session = await call<{ turns: { role: string; text: string }[] }>('getSession', { id: ids[1] });
    expect(session.turns.map((t) => [t.role, t.text])).toEqual([['user', hello[0]!.content], ['assistant', adapter!.text]]);

    // The next message continues both sessions: each reply gets it as its next state.
    const next = (reply: string) => [...hello, { role: 'assistant', content: reply }, { role: 'user', content: 'That was lovely, thank you!' }];
    const second = await turn({ chatId: first.chatId, base: next(base!.text), adapter: next(adapter!.text) });
    expect(second.captured).toBe(true);
    expect((await capturedSessions()).sort()).toEqual([...ids].sort());
    const samples = await call<{ total: number; sessions: { id: string; samples: number }[] }>('listSessions', { hasSamples: true });
    expect(samples.sessions.filter((s) => ids.includes(s.id))).toHaveLength(2);
    const exchanges = (await call<{ exchanges: number }>('captureStatus')).exchanges;

    await call('updateSettings', { captureEnabled: false });
    const off = await turn({ base: hello, adapter: hello });
    expect(off.captured).toBe(false);
    expect((await capturedSessions()).sort()).toEqual([...ids].sort());
    expect((await call<{ exchanges: number }>('captureStatus')).exchanges).toBe(exchanges);
    await call('chatEnd');
  });
});

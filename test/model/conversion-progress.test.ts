// A model's first load in a form converts its weights into the graph cache (docs/design.md §Graph
// cache); for a 7–8B model that takes minutes, so the load says how far it is: the model worker
// passes the weights file's progress on (LoadOptions.onConversion), `generate` and `serve`'s log
// say it once it takes a while (conversionLines), and the Chat page's side shows it while it loads
// (ChatSideState.converting). A later load maps the converted file and says nothing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChatState } from '../../src-shared/chat-api.js';
import { ChatService } from '../../src-main/api/chat-service.js';
import { EventHub } from '../../src-main/workspace/event-hub.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { conversionLines, CONVERSION_QUIET_MS } from '../../src-main/model/weight-file.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { runCli } from '../helpers/cli.js';
import { withEnv } from '../helpers/env.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-conversion-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
const model = (name: string) => writeTinyModel(path.join(root, name), { family: 'llama', seed: 4, numLayers: 2 }).dir;

describe('a first load says how far the conversion of its weights is', () => {
  it('LocalModel.load: from 0 to the whole, in order, once per form; a later load says nothing', async () => {
    const dir = model('tiny');
    const graphCache = path.join(root, 'cache-a');
    const load = async (quantize: 'none' | 'int4') => {
      const seen: [number, number][] = [];
      const m = await LocalModel.load(dir, { graphCache, quantize, prepare: ['generate'], onConversion: (done, total) => seen.push([done, total]) });
      await m.close();
      return seen;
    };
    const first = await load('none');
    expect(first.length).toBeGreaterThan(2);
    const total = first[0]![1];
    expect(first[0]).toEqual([0, total]);
    expect(first.at(-1)).toEqual([total, total]);
    for (let i = 1; i < first.length; i++) expect(first[i]![0]).toBeGreaterThanOrEqual(first[i - 1]![0]);
    expect(await load('none')).toEqual([]);
    // Another form is another conversion.
    expect((await load('int4')).at(-1)).toEqual([expect.any(Number), expect.any(Number)]);
    expect(await load('int4')).toEqual([]);
  });

  it('the commands\' lines: silent for a conversion done in a moment, then each tenth and the end', () => {
    let clock = 0;
    const lines: string[] = [];
    const tell = conversionLines((line) => lines.push(line), () => clock);
    const at = (ms: number, done: number) => ((clock = ms), tell(done, 100));
    at(0, 0);
    at(500, 15);
    expect(lines).toEqual([]);
    at(CONVERSION_QUIET_MS, 22);
    at(CONVERSION_QUIET_MS + 100, 27);
    at(CONVERSION_QUIET_MS + 200, 35);
    at(CONVERSION_QUIET_MS + 300, 100);
    expect(lines.map((l) => l.replace(/^converting the model's weights for this machine, the first time only \(kept for the next load\): /, ''))).toEqual(['20%', '30%', '100%']);
    const quick: string[] = [];
    const quickly = conversionLines((line) => quick.push(line), () => 0);
    for (const done of [0, 50, 100]) quickly(done, 100);
    expect(quick).toEqual([]);
  });

  it('generate says nothing of a first load\'s conversion done in a moment (the tiny model\'s)', async () => {
    const dir = model('tiny-cli');
    const cli = () => withEnv('HINDSIGHT_GRAPH_CACHE', path.join(root, 'cache-cli'), () => runCli('generate', '--model', dir, '--prompt', 'Hi', '--max-new-tokens', '2'));
    const first = await cli();
    expect(first.code).toBe(0);
    expect(first.stderr).not.toContain('converting');
  });

  it('the Chat page\'s side shows it while it loads, and not once it writes', async () => {
    const dir = model('tiny-chat');
    const events = new EventHub();
    const seen: ChatState[] = [];
    events.subscribe((name, payload) => name === 'chat.progress' && seen.push(payload as ChatState));
    const service = new ChatService(events, { capture: () => null });
    try {
      const done = new Promise<ChatState>((resolve) => events.subscribe((name, payload) => {
        const s = payload as ChatState;
        if (name === 'chat.progress' && s.state !== 'running' && s.turn > 0) resolve(s);
      }));
      await withEnv('HINDSIGHT_GRAPH_CACHE', path.join(root, 'cache-chat'), async () => {
        await service.start({ modelDir: dir, adapterDir: null, base: [{ role: 'user', content: 'Hi' }], sampling: { temperature: 0, topP: 1, maxTokens: 2 } });
        const end = await done;
        expect(end.sides[0]).toMatchObject({ status: 'done', converting: null });
      });
      const converting = seen.map((s) => s.sides[0]?.converting).filter((c): c is number => typeof c === 'number');
      expect(converting.at(-1)).toBe(1);
      // Only while loading: once it generates, the side says nothing of it.
      for (const s of seen) if (s.sides[0]?.status !== 'loading') expect(s.sides[0]?.converting ?? null).toBeNull();
    } finally {
      await service.end();
    }
  });
});

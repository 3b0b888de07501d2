// Rollouts with the real engine on the demo model (resources/models/stories260K): whatever the
// model writes, a tool call or not, becomes a consistent episode, and each reply's rollout
// log-probs are the model's own (the engine scores the same tokens to within 1e-4). Then
// `hindsight rollout` end to end: tasks, a user tool at a real loopback endpoint, a database
// for search_history, the success rate, a second run that resumes without repeating, and a
// resume refused when the task file changed under the episodes (a prompt, or only an answer).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { enginePolicy } from '../../src-main/rollout/policy.js';
import { runRollouts } from '../../src-main/rollout/manager.js';
import { ToolRegistry } from '../../src-main/rollout/tools.js';
import { builtinTools } from '../../src-main/rollout/builtin-tools.js';
import { checkEpisode, readEpisodes } from '../../src-main/rollout/episodes-file.js';
import { runCli } from '../helpers/cli.js';

const MODEL = path.resolve(__dirname, '../../resources/models/stories260K');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-rollout-real-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('rollouts on the demo model', () => {
  let engine: ModelEngine;
  beforeAll(() => {
    engine = ModelEngine.open(MODEL, { threads: 1 });
  });
  afterAll(() => engine?.close());

  it('generates K episodes per context in batches, handled whatever the model writes; old log-probs are the model\'s', async () => {
    const contexts = [
      { id: 'story', messages: [{ role: 'user' as const, content: 'Once upon a time there was a little dog.' }], reward: { source: 'task' as const, key: 'dog', score: (a: string) => (/dog/.test(a) ? 1 : -1) } },
      { id: 'sum', messages: [{ role: 'user' as const, content: 'What is 2 + 2?' }] },
    ];
    const episodes = await runRollouts(enginePolicy(engine, { temperature: 1, topP: 1 }), contexts, {
      tools: new ToolRegistry(builtinTools()), rollouts: 3, maxTurns: 3, maxTokens: 24, seedBase: 11,
    });
    expect(episodes).toHaveLength(6);
    for (const e of episodes) {
      checkEpisode(JSON.parse(JSON.stringify(e)), e.id);
      expect(['answer', 'max_tokens', 'max_turns', 'tool_errors']).toContain(e.finish);
      expect(e.summary.tokens).toBeLessThanOrEqual(24);
      expect(e.summary.tokens).toBeGreaterThan(0);
      let k = 0;
      for (const span of e.tokens.generated) {
        const [scored] = await engine.score([{ inputIds: e.tokens.inputIds.slice(0, span.end), responseStart: span.start }]);
        scored!.forEach((lp) => expect(Math.abs(lp - e.tokens.logprobs[k++]!)).toBeLessThan(1e-4));
      }
      expect(e.rewardSource).toBe(e.contextId === 'story' ? 'task' : 'none');
    }
    // Sampled with different seeds: the three samples of a context differ.
    expect(new Set(episodes.slice(0, 3).map((e) => e.tokens.inputIds.join())).size).toBeGreaterThan(1);
    // The same seeds give the same episodes.
    const again = await runRollouts(enginePolicy(engine, { temperature: 1, topP: 1 }), contexts, {
      tools: new ToolRegistry(builtinTools()), rollouts: 3, maxTurns: 3, maxTokens: 24, seedBase: 11,
    });
    expect(again.map((e) => e.tokens)).toEqual(episodes.map((e) => e.tokens));
  });
});

describe('hindsight rollout', () => {
  let server: http.Server;
  let toolUrl: string;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end(JSON.stringify({ result: 'sunny' })));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    toolUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('runs the tasks, prints the success rate, and resumes without repeating an episode', async () => {
    const db = path.join(root, 'h.db');
    expect((await runCli('import', path.resolve(__dirname, '../fixtures/openai-chat.jsonl'), '--db', db)).code).toBe(0);
    const tasks = path.join(root, 'tasks.jsonl');
    fs.writeFileSync(tasks, [
      { messages: [{ role: 'user', content: 'Tell me a story.' }], answer_regex: '.' },
      { messages: [{ role: 'user', content: 'Weather?' }], tools: ['weather', 'search_history'], answer: 'sunny' },
      { messages: [{ role: 'user', content: 'No check here.' }] },
    ].map((t) => JSON.stringify(t)).join('\n') + '\n');
    const toolsFile = path.join(root, 'tools.json');
    fs.writeFileSync(toolsFile, JSON.stringify([{ type: 'function', function: { name: 'weather', description: 'the weather', parameters: { type: 'object' } } }]));
    const out = path.join(root, 'episodes.jsonl');
    const args = ['rollout', '--model', MODEL, '--tasks', tasks, '--out', out, '--rollouts', '2', '--max-tokens', '16', '--tools', toolsFile, '--tool-url', toolUrl, '--db', db, '--threads', '1', '--contexts-per-batch', '2'];
    const first = await runCli(...args);
    expect(first.stderr).not.toMatch(/internal error/);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^episodes: 6 \(answer \d+, max_turns \d+, max_tokens \d+, tool_errors \d+\); tool calls: \d+ \(\d+ invalid\)$/m);
    expect(first.stdout).toMatch(/^success rate: \d\/4 \(\d+\.\d%\)$/m);
    const written = readEpisodes(out).episodes;
    expect(written.map((e) => e.id).sort()).toEqual(['tasks.jsonl:1#0@0', 'tasks.jsonl:1#1@0', 'tasks.jsonl:2#0@0', 'tasks.jsonl:2#1@0', 'tasks.jsonl:3#0@0', 'tasks.jsonl:3#1@0']);
    expect(written.find((e) => e.id === 'tasks.jsonl:2#1@0')!.seed).toBe(3);

    const second = await runCli(...args, '--json');
    expect(second.code).toBe(0);
    expect(second.json()).toMatchObject({ episodes: 6, new_episodes: 0, rewarded: 4 });
    expect(second.stderr).toContain('resuming: 6 episode(s) already in');
    expect(readEpisodes(out).episodes).toHaveLength(6);

    const more = await runCli(...args, '--rollouts', '3', '--json');
    expect(more.json()).toMatchObject({ episodes: 9, new_episodes: 3 });

    // An edited task file: its line 2 now wants another answer, then asks something else, so
    // the file's episodes of tasks.jsonl:2 are not this task's. The run refuses, in one line,
    // and leaves the file.
    const before = fs.readFileSync(out, 'utf8');
    const original = fs.readFileSync(tasks, 'utf8');
    fs.writeFileSync(tasks, original.replace('"answer":"sunny"', '"answer":"rainy"'));
    const newAnswer = await runCli(...args);
    expect(newAnswer.code).toBe(1);
    expect(newAnswer.stderr).toMatch(/^hindsight rollout: .*episodes\.jsonl holds episodes of other tasks \(episode tasks\.jsonl:2#0@0 was made for another version of tasks\.jsonl:2: its answer or tools changed\); resume with the same task file, or write to a new --out$/m);
    expect(fs.readFileSync(out, 'utf8')).toBe(before);
    fs.writeFileSync(tasks, original.replace('Weather?', 'Weather tomorrow?'));
    const edited = await runCli(...args);
    expect(edited.code).toBe(1);
    expect(edited.stderr).toMatch(/^hindsight rollout: .*episodes\.jsonl holds episodes of other tasks \(episode tasks\.jsonl:2#0@0 starts from another prompt than tasks\.jsonl:2 has now\); resume with the same task file, or write to a new --out$/m);
    expect(fs.readFileSync(out, 'utf8')).toBe(before);
  });

  it('refuses bad input in one line before the model loads', async () => {
    const tasks = path.join(root, 'bad.jsonl');
    fs.writeFileSync(tasks, '{"messages":[{"role":"user","content":"hi"}]}\n{"messages":[]}\n');
    const out = path.join(root, 'never.jsonl');
    const bad = await runCli('rollout', '--model', MODEL, '--tasks', tasks, '--out', out);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^hindsight rollout: .*bad\.jsonl:2: "messages" must be a non-empty array/);
    const good = path.join(root, 'good.jsonl');
    fs.writeFileSync(good, '{"messages":[{"role":"user","content":"hi"}]}\n');
    const remote = await runCli('rollout', '--model', MODEL, '--tasks', good, '--out', out, '--tools', path.join(root, 'tools.json'), '--tool-url', 'http://example.com/tool');
    expect(remote.code).toBe(1);
    expect(remote.stderr).toMatch(/--tool-url must point at this machine/);
    const half = await runCli('rollout', '--model', MODEL, '--tasks', good, '--out', out, '--tool-url', 'http://127.0.0.1:1/');
    expect(half.code).toBe(2);
    const unknown = await runCli('rollout', '--model', MODEL, '--tasks', good, '--out', out, '--db', path.join(root, 'absent.db'));
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no database at/);
    expect(fs.existsSync(out)).toBe(false);
  });
});

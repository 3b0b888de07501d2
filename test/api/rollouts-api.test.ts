// The Rollouts view's calls over the HTTP API (docs/design.md §Rollouts view), on an
// episodes.jsonl the test writes in the shape of src-shared/rollout.ts: the runs that have
// rollouts, paging and filters, a blank line, a line that is not an episode and a torn last
// line skipped with notes, the file growing and being rewritten under a live index, rewards
// placed on their turns, the OPD gap with token texts from the run's tokenizer, validation,
// and paths outside the listed runs refused.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { api } from '../helpers/api.js';
import type { RolloutDetail, RolloutPage, RolloutRun } from '../../src-shared/rollouts-api.js';
import type { Episode } from '../../src-shared/rollout.js';
import { episodesFileText, gapOf, runInfo, sampleEpisodes, writeEpisodes, writeRunsFile } from '../helpers/episodes.js';

let server: ServeHandle;
let dir: string;
let runDir: string;
let episodes: Episode[];
let torn: Episode;

const call = <T = any>(name: string, input: unknown = {}): Promise<T> => api<T>(server, name, input);

const list = (input: Record<string, unknown>) => call<RolloutPage>('rolloutsList', { runId: 'onpolicy', ...input });
const get = (id: string, ref: Record<string, unknown> = { runId: 'onpolicy' }) => call<RolloutDetail>('rolloutsGet', { ...ref, id });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-rollouts-'));
  const dbPath = path.join(dir, 'r.db');
  episodes = sampleEpisodes();
  torn = { ...episodes[0]!, id: 'tasks.jsonl:9#0@4', contextId: 'tasks.jsonl:9', step: 4 };
  runDir = path.join(dir, 'runs', 'onpolicy');
  writeEpisodes(runDir, episodesFileText(episodes, torn));
  // The same OPD episode in a run whose model folder is gone: ids instead of token texts.
  writeEpisodes(path.join(dir, 'runs', 'no-model'), JSON.stringify(episodes[2]) + '\n');
  fs.mkdirSync(path.join(dir, 'runs', 'offline'), { recursive: true });
  // Rollouts in a folder no listed run owns: never read.
  writeEpisodes(path.join(dir, 'stray'), JSON.stringify(episodes[0]) + '\n');
  writeRunsFile(dbPath, [
    runInfo('offline', path.join(dir, 'runs', 'offline'), undefined, 1),
    runInfo('no-model', path.join(dir, 'runs', 'no-model'), path.join(dir, 'missing-model'), 2),
    runInfo('onpolicy', runDir, undefined, 3),
  ]);
  server = await serveApp({ dbPath, port: 0, buildRenderer: false });
});

afterAll(async () => {
  await server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('rolloutRuns', () => {
  it('lists the listed runs whose folder holds episodes.jsonl, newest first', async () => {
    const { runs } = await call<{ runs: RolloutRun[] }>('rolloutRuns');
    expect(runs.map((r) => r.runId)).toEqual(['onpolicy', 'no-model']);
    expect(runs[0]).toMatchObject({ runDir, status: 'finished', method: 'combine', bytes: fs.statSync(path.join(runDir, 'episodes.jsonl')).size });
  });
});

describe('rolloutsList', () => {
  it('lists the episodes in file order, skipping a line that is not an episode and the torn last line, with a note each', async () => {
    const page = await list({});
    expect(page.episodes).toBe(5);
    expect(page.total).toBe(5);
    expect(page.items.map((i) => i.id)).toEqual(episodes.map((e) => e.id));
    // Lines 1–3, a blank line 4, the bad line 5, then 6–7; the torn line is 8.
    expect(page.items.map((i) => i.line)).toEqual([1, 2, 3, 6, 7]);
    expect(page.notes).toHaveLength(2);
    expect(page.notes[0]).toMatch(/^line 5: not an episode: contextId must be a string; skipped$/);
    expect(page.notes[1]).toBe('line 8 is incomplete (a run still writing it, or one cut off); skipped');
    expect(page.items[1]).toMatchObject({ contextId: 'tasks.jsonl:1', sample: 1, step: 1, finish: 'answer', turns: 2, toolCalls: 1, toolErrors: 1, reward: -1, rewardSource: 'task', opd: false });
    expect(page.items[2]).toMatchObject({ opd: true, reward: null, rewardSource: 'opd', finish: 'max_tokens', tokens: episodes[2]!.summary.tokens });
    expect(page.counts).toEqual({ finish: { answer: 2, max_turns: 1, max_tokens: 1, tool_errors: 1 }, reward: { positive: 1, negative: 1, zero: 1, none: 2 } });
  });

  it('pages through the matching episodes', async () => {
    const page = await list({ offset: 1, limit: 2 });
    expect(page).toMatchObject({ total: 5, offset: 1 });
    expect(page.items.map((i) => i.line)).toEqual([2, 3]);
    expect((await list({ offset: 10 })).items).toEqual([]);
    expect((await list({ limit: 0 })).items).toEqual([]);
  });

  it('filters by finish reason and by reward sign, together or apart', async () => {
    const ids = async (input: Record<string, unknown>) => (await list(input)).items.map((i) => i.line);
    expect(await ids({ finish: 'answer' })).toEqual([1, 2]);
    expect(await ids({ reward: 'positive' })).toEqual([1]);
    expect(await ids({ reward: 'negative' })).toEqual([2]);
    expect(await ids({ reward: 'zero' })).toEqual([6]);
    expect(await ids({ reward: 'none' })).toEqual([3, 7]);
    expect(await ids({ finish: 'answer', reward: 'none' })).toEqual([]);
    const filtered = await list({ finish: 'tool_errors', reward: 'none' });
    expect(filtered).toMatchObject({ total: 1, episodes: 5 });
  });

  it('names a run by its folder too, in any spelling of it', async () => {
    const page = await call<RolloutPage>('rolloutsList', { runDir: `${path.dirname(runDir)}/./../runs/onpolicy/`, limit: 1 });
    expect(page).toMatchObject({ runId: 'onpolicy', runDir, total: 5 });
  });

  it('validates its input, naming the field', async () => {
    await expect(call('rolloutsList', {})).rejects.toThrow('invalid input: runId or runDir must be given, one of the two');
    await expect(call('rolloutsList', { runId: 'onpolicy', runDir })).rejects.toThrow(/runId or runDir must be given/);
    await expect(list({ limit: 2001 })).rejects.toThrow(/limit must be ≤ 2000/);
    await expect(list({ offset: -1 })).rejects.toThrow(/offset must be ≥ 0/);
    await expect(list({ finish: 'done' })).rejects.toThrow(/finish must be one of "answer", "max_turns", "max_tokens", "tool_errors"/);
    await expect(list({ reward: 1 })).rejects.toThrow(/reward must be one of "positive"/);
    await expect(list({ page: 2 })).rejects.toThrow(/page is not a known field/);
    await expect(call('rolloutsList', { runDir: 42 })).rejects.toThrow(/runDir must be a string/);
  });

  it('refuses a folder or id that is not a listed run, and a listed run without rollouts', async () => {
    await expect(call('rolloutsList', { runDir: path.join(dir, 'stray') })).rejects.toThrow(/stray is not the folder of a training run listed for this database/);
    await expect(call('rolloutsList', { runDir: path.join(runDir, '..') })).rejects.toThrow(/not the folder of a training run listed/);
    await expect(call('rolloutsList', { runDir: '/etc' })).rejects.toThrow(/not the folder of a training run listed/);
    await expect(call('rolloutsList', { runId: 'nope' })).rejects.toThrow("No training run 'nope' for this database.");
    await expect(call('rolloutsList', { runId: 'offline' })).rejects.toThrow(/Run offline has no episodes\.jsonl in .*offline: only on-policy runs write rollouts/);
    await expect(call('rolloutsGet', { runDir: path.join(dir, 'stray'), id: episodes[0]!.id })).rejects.toThrow(/not the folder of a training run listed/);
  });
});

describe('rolloutsGet', () => {
  it('gives the episode with its rewards placed on the assistant turn whose tokens hold them', async () => {
    const detail = await get(episodes[0]!.id);
    expect(detail).toMatchObject({ runId: 'onpolicy', runDir, line: 1, gap: null, tokenNote: null });
    expect(detail.episode).toEqual(episodes[0]);
    // system, user, assistant (tool call), tool, assistant: the reward is on message 4.
    expect(detail.rewards).toEqual([{ message: 4, r: 1, at: episodes[0]!.rewards[0]!.at }]);
    const twoRewards = await get(episodes[3]!.id);
    expect(twoRewards.rewards.map((r) => [r.message, r.r])).toEqual([[2, 0.5], [4, -0.5]]);
  });

  it('keeps a failed tool call as the run wrote it', async () => {
    const { episode } = await get(episodes[1]!.id);
    const assistant = episode.messages[2]!;
    expect(assistant.role === 'assistant' && assistant.toolCalls?.[0]).toMatchObject({ name: 'calculator', ok: false, result: 'error: division by zero' });
    expect(episode.messages[3]).toEqual({ role: 'tool', name: 'calculator', content: 'error: division by zero', error: true });
  });

  it('gives an OPD episode its teacher–student gap per generated token, with the token texts', async () => {
    const detail = await get(episodes[2]!.id);
    expect(detail.tokenNote).toBeNull();
    expect(detail.gap).toHaveLength(1);
    const [turn] = detail.gap!;
    const e = episodes[2]!;
    expect(turn!.message).toBe(2);
    expect(turn!.tokens.map((t) => t.value)).toEqual(e.teacherGap);
    expect(turn!.tokens.map((t) => t.from)).toEqual(e.tokens.logprobs);
    turn!.tokens.forEach((t, k) => expect(t.to).toBeCloseTo(e.tokens.logprobs[k]! + gapOf(k), 12));
    expect(turn!.tokens.map((t) => t.id)).toEqual(e.tokens.inputIds.slice(e.tokens.generated[0]!.start, e.tokens.generated[0]!.end));
    expect(turn!.tokens.map((t) => t.text).join('').trim()).toBe('Once upon a time there was a little cat named Tom.');
    expect(turn!.mean).toBeCloseTo(e.teacherGap!.reduce((a, b) => a + b, 0) / e.teacherGap!.length, 12);
  });

  it('shows token ids, and says why, when the run’s model folder is gone', async () => {
    const detail = await get(episodes[2]!.id, { runId: 'no-model' });
    expect(detail.tokenNote).toMatch(/^Token ids instead of text: model folder .*missing-model: missing file/);
    expect(detail.gap![0]!.tokens[0]!.text).toBe(`#${detail.gap![0]!.tokens[0]!.id}`);
  });

  it('refuses an id the run does not have, and an episode on the torn line', async () => {
    await expect(get('tasks.jsonl:1#7@1')).rejects.toThrow(/Run onpolicy has no episode 'tasks.jsonl:1#7@1'/);
    await expect(get(torn.id)).rejects.toThrow(/has no episode/);
    await expect(call('rolloutsGet', { runId: 'onpolicy' })).rejects.toThrow(/id is required/);
  });
});

describe('a run still writing its episodes', () => {
  it('picks up the rest of the torn line and new lines, then a rewritten file', async () => {
    const file = path.join(runDir, 'episodes.jsonl');
    const full = JSON.stringify(torn);
    fs.appendFileSync(file, full.slice(120) + '\n');
    let page = await list({});
    expect(page.items.map((i) => i.line)).toEqual([1, 2, 3, 6, 7, 8]);
    expect(page.notes).toHaveLength(1);
    expect((await get(torn.id)).episode).toEqual(torn);

    // An episode appended without its newline yet already parses: shown.
    const next = { ...episodes[3]!, id: 'tasks.jsonl:2#1@5', step: 5 };
    fs.appendFileSync(file, JSON.stringify(next));
    page = await list({});
    expect(page.items.at(-1)).toMatchObject({ id: next.id, line: 9 });
    expect((await get(next.id)).line).toBe(9);

    // A run resumed from an earlier checkpoint rewrites the file: indexed again from the start.
    fs.writeFileSync(file, [episodes[4], episodes[0]].map((e) => JSON.stringify(e)).join('\n') + '\n');
    page = await list({});
    expect(page).toMatchObject({ episodes: 2, notes: [] });
    expect(page.items.map((i) => i.id)).toEqual([episodes[4]!.id, episodes[0]!.id]);
    expect((await get(episodes[0]!.id)).episode).toEqual(episodes[0]);

    // Rewritten longer, with other lines where the old ones ended: not mistaken for an append.
    fs.writeFileSync(file, [episodes[0], episodes[4], episodes[2]].map((e) => JSON.stringify(e)).join('\n') + '\n');
    page = await list({});
    expect(page.items.map((i) => i.id)).toEqual([episodes[0]!.id, episodes[4]!.id, episodes[2]!.id]);
    expect((await get(episodes[4]!.id)).line).toBe(2);
  });
});

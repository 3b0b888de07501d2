// The data commands end to end: real importers, real database files, exit statuses.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.js';
import { TEST_TIMEOUT_MS } from '../helpers/deadlines.js';
import { tempDir } from '../store/helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));
const CHATGPT = path.join(FIXTURES, 'chatgpt-branches.json');
const CHATGPT_ID = 'chatgpt:6a1f0c2e-fixture-chatgpt-branches';
const run = promisify(execFile);

describe('npm run cli (a real process)', () => {
  it('import --json prints the summary, and export --format kto writes valid lines', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'x.db');
    const env = { ...process.env, npm_config_loglevel: 'error' };
    const imported = await run('npm', ['run', '-s', 'cli', '--', 'import', CHATGPT, '--db', db, '--json'], { cwd: ROOT, env });
    const summary = JSON.parse(imported.stdout);
    expect(summary).toMatchObject({ sessions_added: 1, sessions_updated: 0, sessions_unchanged: 0, turns: 6, samples: 2, warnings: [], added_ids: [CHATGPT_ID] });
    expect(summary.files).toEqual([expect.objectContaining({ path: CHATGPT, outcome: 'imported', format: 'chatgpt', sessions_added: 1 })]);
    const bin = path.join(ROOT, 'bin/hindsight.mjs');
    await run(process.execPath, [bin, 'label', CHATGPT_ID, '3', '--reward', '-1', '--db', db], { cwd: ROOT });
    await run(process.execPath, [bin, 'judge', '--backend', 'heuristic', '--hints', '--db', db], { cwd: ROOT });
    const out = path.join(dir, 'kto.jsonl');
    const exported = await run(process.execPath, [bin, 'export', '--format', 'kto', '--out', out, '--db', db, '--json'], { cwd: ROOT });
    expect(JSON.parse(exported.stdout)).toMatchObject({ format: 'kto', lines: 2, path: out });
    const lines = fs.readFileSync(out, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
    const question = { role: 'user', content: 'How often should I water a snake plant?' };
    const firstReply = { role: 'assistant', content: 'About every two to three weeks. Let the soil dry out completely between waterings.' };
    expect(lines).toEqual([
      { prompt: [question], completion: [firstReply], label: true }, // "Thanks! …": the heuristic's +1
      {
        prompt: [question, firstReply, { role: 'user', content: 'Thanks! And how much light does it need?' }],
        completion: [{ role: 'assistant', content: 'It copes with low light, but it grows faster in bright, indirect light.' }],
        label: false, // the manual −1
      },
    ]);
  }, TEST_TIMEOUT_MS); // several processes, each slow to start on a loaded machine

  it('a truncated file exits 1 with one line naming the file and leaves the database bytes as they were', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'x.db');
    const bin = path.join(ROOT, 'bin/hindsight.mjs');
    await run(process.execPath, [bin, 'import', CHATGPT, '--db', db], { cwd: ROOT });
    const before = fs.readFileSync(db);
    const truncated = path.join(dir, 'truncated.json');
    fs.writeFileSync(truncated, fs.readFileSync(CHATGPT).subarray(0, 5000));
    const err = await run(process.execPath, [bin, 'import', truncated, '--db', db], { cwd: ROOT }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).toBe(1);
    expect(err?.stderr.trim().split('\n')).toHaveLength(1);
    expect(err?.stderr).toContain(truncated);
    expect(fs.readFileSync(db).equals(before)).toBe(true);
  }, TEST_TIMEOUT_MS); // several processes, each slow to start on a loaded machine
});

describe('every fixture export imports (db-level counts)', () => {
  // turns / samples per file as the pipeline derives them:
  // - chatgpt: the active branch has 6 turns; the last reply (the regenerated pot answer) got no reaction.
  // - claude: one question, one answer, no reaction: 0 samples ("no reaction after any reply").
  // - sharegpt: 12 turns, 6 replies, the last without reaction: 5 samples.
  // - hf messages: 3 conversations × 4 turns, one reaction each: 3 samples.
  // - openai: the tool call (its result is the next state) and the reply thanked: 2 samples; the
  //   second chat has no reaction.
  // - openwebui: the kept haiku, thanked: 1 sample.
  const cases: [string, { sessions: number; turns: number; samples: number; without: number }][] = [
    ['chatgpt-branches.json', { sessions: 1, turns: 6, samples: 2, without: 0 }],
    ['claude-thinking.json', { sessions: 1, turns: 2, samples: 0, without: 1 }],
    ['sharegpt-single.json', { sessions: 1, turns: 12, samples: 5, without: 0 }],
    ['hf-messages-images.json', { sessions: 3, turns: 12, samples: 3, without: 0 }],
    ['openai-chat.jsonl', { sessions: 2, turns: 8, samples: 2, without: 1 }],
    ['openwebui-regenerated.json', { sessions: 1, turns: 3, samples: 1, without: 0 }],
  ];

  it.each(cases)('%s', async (file, expected) => {
    const db = path.join(tempDir(), 'x.db');
    const r = await cli('import', path.join(FIXTURES, file), '--db', db, '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ sessions_added: expected.sessions, turns: expected.turns, samples: expected.samples, warnings: [] });
    const stats = (await cli('stats', '--db', db, '--json')).json();
    expect(stats).toMatchObject({ sessions: expected.sessions, turns: expected.turns, samples: expected.samples });
    expect(stats.sessions_without_samples).toBe(expected.without);
  });

  it('all of them together, twice: the second import adds nothing and the stats stay identical', async () => {
    const db = path.join(tempDir(), 'all.db');
    const files = cases.map(([f]) => path.join(FIXTURES, f));
    const first = await cli('import', ...files, '--db', db, '--json');
    expect(first.json()).toMatchObject({ sessions_added: 9, turns: 43, samples: 13 });
    const stats = (await cli('stats', '--db', db, '--json')).json();
    expect(stats).toEqual({ sessions: 9, turns: 43, samples: 13, labeled: { pos: 0, neg: 0, neutral: 0, unlabeled: 13 }, sessions_without_samples: 2 });
    const bytes = fs.readFileSync(db);
    const second = await cli('import', ...files, '--db', db, '--json');
    expect(second.json()).toMatchObject({ sessions_added: 0, sessions_updated: 0, sessions_unchanged: 9, turns: 43, samples: 13 });
    expect((await cli('stats', '--db', db, '--json')).json()).toEqual(stats);
    expect(fs.readFileSync(db).equals(bytes)).toBe(true);
  });
});

describe('bad input', () => {
  it('binary and wrong-format files exit 1, name the file, and leave the database untouched', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'x.db');
    expect((await cli('import', CHATGPT, '--db', db)).code).toBe(0);
    const before = fs.readFileSync(db);
    const binary = path.join(dir, 'photo.json');
    fs.writeFileSync(binary, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0xff, 0xfe]));
    const wrong = path.join(dir, 'settings.json');
    fs.writeFileSync(wrong, JSON.stringify({ theme: 'dark', fontSize: 14 }));
    const missing = path.join(dir, 'nope.json');
    for (const file of [binary, wrong, missing]) {
      const r = await cli('import', file, '--db', db);
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain(file);
      expect(fs.readFileSync(db).equals(before)).toBe(true);
    }
  });

  it('an explicit --format that the file clearly is not exits 1, naming the format it looks like', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'x.db');
    const r = await cli('import', CHATGPT, '--format', 'claude', '--db', db);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(CHATGPT);
    expect(r.stderr).toMatch(/looks like a chatgpt export, not claude/);
  });

  it('a malformed conversation is skipped with a warning naming it; the rest imports', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'sharegpt.json');
    fs.writeFileSync(
      file,
      JSON.stringify([
        { id: 'good-one', conversations: [{ from: 'human', value: 'hi' }, { from: 'gpt', value: 'Hello!' }, { from: 'human', value: 'thanks!' }] },
        { id: 'broken-one', conversations: 'this should be a list' },
      ]),
    );
    const r = await cli('import', file, '--db', path.join(dir, 'x.db'), '--json');
    expect(r.code).toBe(0);
    const summary = r.json();
    expect(summary).toMatchObject({ sessions_added: 1, turns: 3, samples: 1 });
    expect(summary.warnings).toHaveLength(1);
    expect(summary.warnings[0]).toMatch(/skipped/);
    expect(summary.warnings[0]).toContain('broken-one');
  });

  it('bad usage exits 2; an unknown session exits 1 with a clear message', async () => {
    const db = path.join(tempDir(), 'x.db');
    expect((await cli('import', '--db', db)).code).toBe(2);
    expect((await cli('import', CHATGPT, '--format', 'csv', '--db', db)).code).toBe(2);
    expect((await cli('export', '--format', 'parquet', '--out', 'x', '--db', db)).code).toBe(2);
    expect((await cli('label', 'some-session', 'two', '--reward', '1', '--db', db)).code).toBe(2);
    expect((await cli('label', 'some-session', '2', '--reward', '3', '--db', db)).code).toBe(2);
    expect((await cli('judge', '--backend', 'magic', '--db', db)).code).toBe(2);
    expect((await cli('judge', '--backend', 'heuristic', '--votes', '0', '--db', db)).code).toBe(2);
    const unknown = await cli('label', 'no-such-session', '1', '--reward', '1', '--db', db);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no session 'no-such-session'/);
  });
});

describe('stats after a judge run with hints', () => {
  it('says the judge looked for hints and found none, instead of asking for a run with hints', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'x.db');
    const file = path.join(dir, 'thanks.json');
    const chat = (id: string) => ({
      id,
      conversations: [
        { from: 'human', value: 'What is the capital of Norway?' },
        { from: 'gpt', value: 'Oslo.' },
        { from: 'human', value: 'Thanks, that is right.' },
      ],
    });
    fs.writeFileSync(file, JSON.stringify([chat('a'), chat('b')]));
    expect((await cli('import', file, '--db', db)).code).toBe(0);
    const ask = /No sample has a hint.*\(run the judge with hints\)/;
    expect((await cli('stats', '--db', db)).stdout).toMatch(ask);
    expect((await cli('judge', '--backend', 'heuristic', '--db', db)).code).toBe(0);
    expect((await cli('stats', '--db', db)).stdout).toMatch(ask);
    expect((await cli('judge', '--backend', 'heuristic', '--hints', '--db', db)).code).toBe(0);
    const after = (await cli('stats', '--db', db)).stdout;
    expect(after).not.toMatch(ask);
    expect(after).toMatch(/No sample has a hint: the judge ran with hints and found none/);
  });
});

describe('samples, label, judge, export, demo', () => {
  it('a manual label set from the CLI survives judge and re-import; samples prints one line per sample', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'x.db');
    await cli('import', CHATGPT, '--db', db);
    const id = CHATGPT_ID;
    const labelled = await cli('label', id, '1', '--reward', '-1', '--hint', 'Say how to check that the soil is dry.', '--db', db, '--json');
    expect(labelled.json()).toMatchObject({ session_id: id, response_turn: 1, reward: -1, source: 'manual' });
    const judged = await cli('judge', '--backend', 'heuristic', '--hints', '--db', db, '--json');
    expect(judged.json()).toMatchObject({ backend: 'heuristic', judged: 1, skippedManual: 1 });
    await cli('import', CHATGPT, '--db', db);
    const lines = (await cli('samples', '--db', db)).stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual([
      {
        session_id: id, response_turn: 1, feedback_turn: 2,
        response: 'About every two to three weeks. Let the soil dry out completely between waterings.',
        feedback: 'Thanks! And how much light does it need?', reward: -1, hint: 'Say how to check that the soil is dry.', label_source: 'manual',
      },
      {
        session_id: id, response_turn: 3, feedback_turn: 4,
        response: 'It copes with low light, but it grows faster in bright, indirect light.',
        feedback: 'What pot size should a 30 cm plant live in?', reward: 0, hint: null, label_source: 'heuristic',
      },
    ]);
    expect((await cli('samples', '--session', id, '--db', db)).stdout.trimEnd().split('\n')).toHaveLength(2);
    expect((await cli('samples', '--session', 'other', '--db', db)).code).toBe(1);
  });

  it('export writes each format atomically; demo runs the whole path and reports it', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'demo.db');
    const demo = await cli('demo', '--db', db, '--json');
    expect(demo.code).toBe(0);
    const report = demo.json();
    expect(report.imported).toMatchObject({ sessions_added: 45, samples: 64 });
    expect(report.judged.judged).toBe(64);
    expect(report.stats).toMatchObject({ sessions: 45, samples: 64 });
    expect(fs.existsSync(report.export.path)).toBe(true);
    const text = await cli('demo', '--db', path.join(dir, 'again.db'));
    expect(text.stdout).toMatch(/2\. Imported the demo exports in .*\(demo-chatgpt\.json, demo-claude\.json, demo-sharegpt\.json\): 45 sessions added/);
    expect(text.stdout).toMatch(/6\. Wrote the KTO export: 54 lines/);
    for (const format of ['samples', 'openclaw', 'kto', 'sft', 'dpo', 'sdft']) {
      const out = path.join(dir, `${format}.jsonl`);
      const r = await cli('export', '--format', format, '--out', out, '--db', db, '--json');
      expect(r.code).toBe(0);
      expect(r.json().lines).toBeGreaterThan(0);
      expect(fs.existsSync(out)).toBe(true);
    }
    expect(fs.readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });
});

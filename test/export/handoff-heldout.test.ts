// Held-out sessions in a TRL hand-off (docs/design.md §Hand-off, §Evaluation): the cluster
// trains on data/, so they are left out of it and written to heldout/ in the same fields, for
// its evaluation; the command says how many. `--include-heldout` puts them back into data/.
// The plain export is a dataset, not a training run: it keeps them.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRL_METHODS } from '../../src-shared/handoff.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { HeuristicJudge } from '../../src-main/judge/verdicts.js';
import { runCli } from '../helpers/cli.js';
import { SESSION_002, SESSION_003, SORTING, conv, fakeExport, tempWorkspace } from '../store/helpers.js';

const HELD = 'openai:rec';
let dir: string;
let dbPath: string;
let heldSamples: number;

beforeAll(async () => {
  const made = await tempWorkspace();
  ({ dir, dbPath } = made);
  const ws = made.ws;
  await ws.importExport(
    fakeExport('x.jsonl', [conv('sort', SORTING, { createdAt: 10 }), conv('rec', SESSION_002, { createdAt: 20 }), conv('django', SESSION_003, { createdAt: 30 })]),
  );
  await runJudge(ws, new HeuristicJudge(), { hints: true, force: true });
  ws.setHeldOut(['openai:sort', 'openai:django'], false);
  heldSamples = ws.setHeldOut([HELD], true).heldOut.samples;
  expect(heldSamples).toBeGreaterThan(0);
  ws.close();
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const rows = (out: string, file: string) => fs.readFileSync(path.join(out, file), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const handoff = (out: string, ...flags: string[]) => runCli('handoff', '--db', dbPath, '--to', 'trl', '--base-model', 'Qwen/Qwen3-14B', '--out', out, '--json', ...flags);

describe('handoff --to trl and held-out sessions', () => {
  it('leaves them out of data/, writes them to heldout/, and says how many', async () => {
    const out = path.join(dir, 'default');
    const r = await handoff(out);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`left 1 held-out session (${heldSamples} sample${heldSamples === 1 ? '' : 's'}) out of data/; they are in heldout/ for evaluation`);
    const result = r.json();
    expect(result.heldOut).toMatchObject({ sessions: 1, samples: heldSamples, included: false });
    expect(result.heldOut.datasets.map((d: { file: string }) => d.file)).toEqual(TRL_METHODS.map((m) => `heldout/${m}.jsonl`));

    const trained = rows(out, 'data/grpo.jsonl').map((row) => row.session_id);
    expect(trained.length).toBeGreaterThan(0);
    expect(trained).not.toContain(HELD);
    expect(new Set(rows(out, 'heldout/grpo.jsonl').map((row) => row.session_id))).toEqual(new Set([HELD]));
    for (const { file, lines } of result.heldOut.datasets) expect(rows(out, file).length, file).toBe(lines);

    expect(JSON.parse(fs.readFileSync(path.join(out, 'handoff.json'), 'utf8')).held_out).toMatchObject({ sessions: 1, included: false });
    expect(fs.readFileSync(path.join(out, 'README.md'), 'utf8')).toMatch(/`heldout\/` has their datasets/);
  });

  it('--include-heldout puts them back into data/ (every line of both folders, nothing else) and removes an earlier heldout/', async () => {
    const out = path.join(dir, 'default'); // the folder the test above wrote, heldout/ included
    const split = Object.fromEntries(TRL_METHODS.map((m) => [m, rows(out, `data/${m}.jsonl`).length + rows(out, `heldout/${m}.jsonl`).length]));
    const r = await handoff(out, '--include-heldout');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`included 1 held-out session (${heldSamples} sample${heldSamples === 1 ? '' : 's'}) in the training data (--include-heldout)`);
    expect(r.json().heldOut).toEqual({ sessions: 1, samples: heldSamples, included: true, datasets: [] });
    for (const m of TRL_METHODS) expect(rows(out, `data/${m}.jsonl`).length, m).toBe(split[m]);
    expect(rows(out, 'data/grpo.jsonl').map((row) => row.session_id)).toContain(HELD);
    expect(fs.existsSync(path.join(out, 'heldout'))).toBe(false);
  });

  it('the plain export keeps them: it is a dataset, not a training run', async () => {
    const file = path.join(dir, 'samples.jsonl');
    expect((await runCli('export', '--db', dbPath, '--format', 'samples', '--out', file)).code).toBe(0);
    expect(rows(dir, 'samples.jsonl').map((row) => row.session_id)).toContain(HELD);
  });
});

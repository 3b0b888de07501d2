// The bundled demo data (resources/samples/, written by scripts/make-demo-data.mjs) shows the
// whole product: the README walkthrough (import, the heuristic judge with hints, export) gives
// lines in every export format, Checks gets a real label distribution and sessions without
// samples, and a short fine-tune on the demo model has signal that moves its curves.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPORT_FORMATS } from '../../src-shared/views.js';
import { demoExportFiles } from '../../src-main/import/demo-data.js';
import { serveApp } from '../../src-main/api/serve-app.js';
import { runCli as cli } from '../helpers/cli.js';
import { tempDir } from '../store/helpers.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SAMPLES = path.join(ROOT, 'resources', 'samples');
const DEMO_MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');

describe('the demo data through the README walkthrough', () => {
  let dir: string;
  let db: string;

  beforeAll(async () => {
    dir = tempDir();
    db = path.join(dir, 'demo.db');
    const files = demoExportFiles(SAMPLES);
    expect(files.map((f) => path.basename(f))).toEqual(['demo-chatgpt.json', 'demo-claude.json', 'demo-sharegpt.json']);
    const imported = await cli('import', ...files, '--db', db, '--json');
    expect(imported.code).toBe(0);
    expect(imported.json()).toMatchObject({ sessions_added: 45, warnings: [] });
    expect((await cli('judge', '--backend', 'heuristic', '--hints', '--db', db)).code).toBe(0);
  });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('has 30 or more ChatGPT conversations with branches, tool calls and several formats', async () => {
    const chatgpt = JSON.parse(fs.readFileSync(path.join(SAMPLES, 'demo-chatgpt.json'), 'utf8'));
    expect(chatgpt.length).toBeGreaterThanOrEqual(30);
    const nodes = chatgpt.flatMap((c: { mapping: Record<string, { children: string[]; message: { recipient?: string } | null }> }) => Object.values(c.mapping));
    expect(nodes.filter((n: { children: string[] }) => n.children.length > 1).length).toBeGreaterThanOrEqual(5); // regenerations and an edit
    expect(nodes.filter((n: { message: { recipient?: string } | null }) => n.message && n.message.recipient !== 'all').length).toBeGreaterThanOrEqual(5); // tool calls
    const sources = (await cli('stats', '--db', db, '--json')).json();
    expect(sources.sessions).toBe(45);
  });

  it('gives lines in every export format', async () => {
    const lines: Record<string, number> = {};
    for (const format of EXPORT_FORMATS) {
      const out = path.join(dir, `${format}.jsonl`);
      const r = await cli('export', '--format', format, '--out', out, '--db', db, '--json');
      expect(r.code).toBe(0);
      lines[format] = r.json().lines;
      expect(fs.readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(lines[format]!);
    }
    expect(lines).toEqual({ samples: 64, openclaw: 64, kto: 54, sft: 36, dpo: 6, sdft: 14 });
    // Regenerations with other texts: no pair has the same chosen and rejected text.
    const dpo = fs.readFileSync(path.join(dir, 'dpo.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    for (const pair of dpo) expect(pair.chosen[0].content).not.toBe(pair.rejected[0].content);
  });

  it('gives Checks a real label distribution and sessions without samples, each with its reason', async () => {
    const stats = (await cli('stats', '--db', db, '--json')).json();
    expect(stats).toEqual({ sessions: 45, turns: 188, samples: 64, labeled: { pos: 36, neg: 18, neutral: 10, unlabeled: 0 }, sessions_without_samples: 5 });
    const text = (await cli('stats', '--db', db)).stdout;
    expect(text.match(/: no reaction after any reply$/gm)).toHaveLength(4);
    expect(text.match(/: no assistant turn$/gm)).toHaveLength(1);
    expect(text).not.toMatch(/No sample has a hint/);
    // Every kind of signal is there: tool errors and successes, refusals, corrections with hints.
    const samples = (await cli('samples', '--db', db)).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(samples.filter((s) => s.hint?.startsWith('The tool call failed')).length).toBe(2);
    expect(samples.some((s) => /instead/.test(s.hint ?? ''))).toBe(true);
    expect(samples.filter((s) => s.reward === 0 && s.hint).length).toBeGreaterThanOrEqual(1); // a hint without a verdict
  });

  it('trains the demo model: the loss and the mean reward change from step to step', async () => {
    const out = path.join(dir, 'adapter');
    const r = await cli('train', '--model', DEMO_MODEL, '--out', out, '--method', 'combine', '--steps', '6', '--batch-size', '4', '--seed', '1', '--db', db, '--json');
    expect(r.code).toBe(0);
    // Step lines only: a run may open with note lines (samples over the window), and the
    // held-out split and its evaluations have lines with a `type` (docs/design.md §Evaluation).
    const log = fs.readFileSync(path.join(out, 'trainer_log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.type === undefined && typeof l.step === 'number');
    expect(log).toHaveLength(6);
    expect(new Set(log.map((l) => l.loss.toFixed(4))).size).toBeGreaterThan(3);
    expect(new Set(log.map((l) => l.reward_mean.toFixed(2))).size).toBeGreaterThan(1);
    expect(log.some((l) => l.teacher_student_gap !== null)).toBe(true);
  }, 180_000);
});

describe('"Load sample data"', () => {
  it('imports every demo export', async () => {
    const dir = tempDir();
    const server = await serveApp({ dbPath: path.join(dir, 'app.db'), port: 0, buildRenderer: false });
    try {
      const res = await fetch(`${server.url}api/loadSampleData`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` },
        body: '{}',
      });
      expect(res.status).toBe(200);
      expect((await res.json()).value).toMatchObject({ sessions_added: 45, samples: 64, warnings: [] });
    } finally {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

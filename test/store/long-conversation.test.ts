// One long conversation: each turn is stored once and a sample keeps a span over its turns,
// so the database grows linearly with the turns (it used to copy every sample's context:
// quadratic). Also: the linear context windowing agrees with the reference rule, and a
// database of the old schema is converted with its labels kept.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Role } from '../../src-shared/types.js';
import { analyseSession, fullContext, windowContext, type ClassifiableTurn, type ContextWindow } from '../../src-main/pipeline/classify.js';
import { loadSqlJs } from '../../src-main/store/database.js';
import { MIGRATIONS } from '../../src-main/store/migrations.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { SORTING, conv, fakeExport, tempDir, type TurnSpec } from './helpers.js';

/** A seeded PRNG (mulberry32), so every run checks the same sessions. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A user/assistant dialogue of `turns` short turns after a system turn. */
function longDialogue(turns: number): TurnSpec[] {
  const out: TurnSpec[] = [['system', 'You are a helpful assistant.']];
  for (let i = 1; i < turns; i++) out.push(i % 2 === 1 ? ['user', `question number ${i}: what next?`] : ['assistant', `answer number ${i}, here it is.`]);
  return out;
}

async function importedSize(turns: number): Promise<{ bytes: number; samples: number }> {
  const dbPath = path.join(tempDir(), 'long.db');
  const ws = await Workspace.open(dbPath);
  await ws.importExport(fakeExport('long.json', [conv(`long-${turns}`, longDialogue(turns))]));
  const samples = ws.stats().samples;
  ws.close();
  return { bytes: fs.statSync(dbPath).size, samples };
}

describe('one long conversation', () => {
  it('the database grows linearly: 4,000 turns take less than 2.5 times the space of 2,000', async () => {
    const small = await importedSize(2000);
    const large = await importedSize(4000);
    expect(small.samples).toBe(999);
    expect(large.samples).toBe(1999);
    expect(large.bytes / small.bytes).toBeLessThan(2.5);
  }, 120_000);

  it('computes the same contexts as the reference window rule, for any window', () => {
    const random = rng(7);
    const roles: Role[] = ['user', 'assistant', 'assistant', 'user', 'tool', 'system'];
    const windows: (ContextWindow | undefined)[] = [undefined, {}, { lastTurns: 1 }, { lastTurns: 3 }, { tokenBudget: 1 }, { tokenBudget: 12 }, { tokenBudget: 40, lastTurns: 2 }, { lastTurns: 0 }];
    for (let round = 0; round < 200; round++) {
      const turns: ClassifiableTurn[] = [];
      const n = 2 + Math.floor(random() * 30);
      for (let i = 0; i < n; i++) {
        const kind = random();
        const text = kind < 0.05 ? '' : kind < 0.1 ? '[METADATA] x' : 'w'.repeat(1 + Math.floor(random() * 60));
        turns.push({ role: i < 2 && random() < 0.5 ? 'system' : roles[Math.floor(random() * roles.length)], text, hidden: random() < 0.05 });
      }
      for (const window of windows) {
        for (const s of analyseSession(turns, window).samples) {
          const full = fullContext(turns, s.responseTurn);
          expect(s.fullContextTurns).toEqual(full);
          expect(s.contextTurns).toEqual(windowContext(turns, full, window));
        }
      }
    }
  });
});

describe('migration 3: contexts become spans', () => {
  /** A database as Hindsight wrote it before migration 3: each sample lists its context turns. */
  async function oldDatabase(dbPath: string, window: ContextWindow): Promise<void> {
    const SQL = await loadSqlJs();
    const db = new SQL.Database();
    db.exec(MIGRATIONS[0]);
    db.exec(MIGRATIONS[1]);
    db.exec('CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (2)');
    db.run("INSERT INTO settings (key, value) VALUES ('context_window', ?)", [JSON.stringify(window)]);
    db.run("INSERT INTO sources (id, path, format, sha256, imported_at, sessions, turns) VALUES (1, 'old.json', 'openai', 'abc', 1, 1, 8)");
    db.run("INSERT INTO sessions (id, source_id, format, external_id, title, content_hash, updated_at) VALUES ('openai:sorting', 1, 'openai', 'sorting', 'sorting', 'old', 1)");
    const turns: ClassifiableTurn[] = conv('sorting', SORTING).turns;
    const analysis = analyseSession(turns, window);
    turns.forEach((t, i) => {
      db.run('INSERT INTO turns (session_id, idx, role, text, classification) VALUES (?, ?, ?, ?, ?)', ['openai:sorting', i, t.role, t.text, analysis.turns[i].classification]);
    });
    for (const s of analysis.samples) {
      db.run('INSERT INTO samples (session_id, response_turn, feedback_turn, next_state_role, context_turns, context_full, match_hash) VALUES (?, ?, ?, ?, ?, ?, ?)', [
        'openai:sorting', s.responseTurn, s.feedbackTurn, s.nextStateRole, JSON.stringify(s.contextTurns), 0, `old-hash-${s.responseTurn}`,
      ]);
    }
    db.run("INSERT INTO labels (session_id, response_turn, reward, hint, source, updated_at) VALUES ('openai:sorting', 2, -1, 'Use Python', 'manual', 5)");
    fs.writeFileSync(dbPath, db.export());
    db.close();
  }

  async function samplesExport(ws: Workspace): Promise<string> {
    const out = path.join(tempDir(), 'samples.jsonl');
    await ws.exportJsonl('samples', out);
    return fs.readFileSync(out, 'utf8');
  }

  it('converts an old database: the same contexts, labels kept, and a re-import still finds them', async () => {
    const window = { lastTurns: 2 };
    const dbPath = path.join(tempDir(), 'old.db');
    await oldDatabase(dbPath, window);

    // A reader converts in memory and leaves the file alone.
    const before = fs.readFileSync(dbPath);
    const reader = await Workspace.open(dbPath, { access: 'read' });
    const readExport = await samplesExport(reader);
    reader.close();
    expect(fs.readFileSync(dbPath).equals(before)).toBe(true);

    const ws = await Workspace.open(dbPath);
    expect(ws.query("SELECT 1 FROM settings WHERE key = 'samples_need_rebuild'")).toEqual([]);
    const migrated = await samplesExport(ws);
    expect(migrated).toBe(readExport);

    // The same conversation imported fresh, with the same window and label, exports the same bytes.
    const fresh = await Workspace.open(path.join(tempDir(), 'fresh.db'));
    fresh.setContextWindow(window);
    await fresh.importExport(fakeExport('new.json', [conv('sorting', SORTING)]));
    fresh.setLabel('openai:sorting', 2, { reward: -1, hint: 'Use Python' });
    expect(migrated).toBe(await samplesExport(fresh));
    fresh.close();

    // Labels follow their replies across a re-import, by the new match hashes.
    const longer = conv('sorting', [...SORTING, ['assistant', 'Anything else?'], ['user', 'No, thanks.']]);
    const summary = await ws.importExport(fakeExport('newer.json', [longer]));
    expect(summary.sessions_updated).toBe(1);
    expect(ws.listSamples('openai:sorting').find((s) => s.responseTurn === 2)?.label).toMatchObject({ reward: -1, hint: 'Use Python', source: 'manual' });
    ws.close();
  });
});

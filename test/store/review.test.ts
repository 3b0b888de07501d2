// The review queue in the workspace (docs/design.md §Review): what a heuristic run and an LLM
// judge put in it, the Checks count, a manual label marking a sample reviewed, and migration 5
// counting manual labels written before it as reviewed.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { LabelSource } from '../../src-shared/types.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { HeuristicJudge, type JudgeBackend, type JudgeInput, type JudgeVerdict } from '../../src-main/judge/verdicts.js';
import { loadSqlJs } from '../../src-main/store/database.js';
import { MIGRATIONS } from '../../src-main/store/migrations.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { SORTING, conv, fakeExport, tempDir, tempWorkspace } from './helpers.js';

/** An LLM judge stand-in that calls every reply good, unanimously. */
class AlwaysGood implements JudgeBackend {
  readonly provenance = { backend: 'openai' as const, model: 'always-good', promptVersion: 'reward-v1' };
  readonly labelSource: LabelSource = 'judge:always-good';
  async judge(_: JudgeInput): Promise<JudgeVerdict> {
    return { reward: 1, hint: null, votes: [1, 1, 1].map(() => ({ reward: 1 as const, raw: '\\boxed{1}' })), confidence: 1, evidence: ['votes: 3× +1, 0× 0, 0× −1'] };
  }
}

describe('review queue', () => {
  it('holds the judge labels worth a look, most uncertain first; Checks counts them; a manual label takes one out', async () => {
    const { ws } = await tempWorkspace();
    await ws.importExport(fakeExport('sorting.json', [conv('sorting', SORTING)]));
    await runJudge(ws, new HeuristicJudge(), { hints: false });
    const before = ws.reviewQueue();
    // The heuristic is sure of "No, I said Python…" (−1) and "Perfect, thanks!" but only weakly of the rest.
    for (const item of before.items) expect(item.reasons).toContain('weak');
    expect(ws.checks().unreviewedUncertain).toBe(before.total);

    // An LLM judge that says +1 to the corrected reply disagrees with the heuristic: it goes first.
    await runJudge(ws, new AlwaysGood(), { hints: false, votes: 3 });
    const after = ws.reviewQueue();
    expect(after.items[0]).toMatchObject({ reasons: ['disagree'], heuristicReward: -1, uncertainty: 1, sample: { responseTurn: 2 } });
    expect(after.items[0]!.reasonTexts).toEqual(['the heuristic says −1']);
    expect(after.items[0]!.prompt).toBe('Write me a function to sort a list in Python.');
    expect(ws.checks().warnings.join('\n')).toContain(`${after.total} label${after.total === 1 ? '' : 's'} still unreviewed and uncertain`);

    const label = ws.setLabel('openai:sorting', 2, { reward: -1 });
    expect(label.reviewedAt).not.toBeNull();
    expect(ws.reviewQueue().items.find((i) => i.sample.responseTurn === 2)).toBeUndefined();
    expect(ws.checks().unreviewedUncertain).toBe(after.total - 1);
    ws.close();
  });

  it('migration 5: manual labels written before it count as reviewed; judge labels do not', async () => {
    const dbPath = path.join(tempDir(), 'v4.db');
    const ws0 = await Workspace.open(dbPath);
    await ws0.importExport(fakeExport('sorting.json', [conv('sorting', SORTING)]));
    ws0.close();
    // Take the database back to schema 4, with one manual and one heuristic label.
    const SQL = await loadSqlJs();
    const db = new SQL.Database(fs.readFileSync(dbPath));
    db.exec('ALTER TABLE labels DROP COLUMN reviewed_at; ALTER TABLE labels DROP COLUMN composite; DROP INDEX capture_exchanges_completion; ALTER TABLE capture_exchanges DROP COLUMN completion_id; DROP TABLE split_overrides; DROP TABLE chats;');
    db.exec('ALTER TABLE capture_exchanges DROP COLUMN messages_base; ALTER TABLE capture_exchanges DROP COLUMN messages_kept;');
    db.exec('UPDATE schema_version SET version = 4');
    db.run("INSERT INTO labels (session_id, response_turn, reward, source, updated_at) VALUES ('openai:sorting', 2, -1, 'manual', 7)");
    db.run("INSERT INTO labels (session_id, response_turn, reward, source, updated_at, confidence) VALUES ('openai:sorting', 4, 1, 'heuristic', 8, 0.2)");
    fs.writeFileSync(dbPath, db.export());
    db.close();
    expect(MIGRATIONS).toHaveLength(8);

    const ws = await Workspace.open(dbPath);
    const [manual, judged] = ws.listSamples();
    expect(manual!.label).toMatchObject({ source: 'manual', reviewedAt: 7, composite: null });
    expect(judged!.label).toMatchObject({ source: 'heuristic', reviewedAt: null });
    expect(ws.reviewQueue().items.map((i) => i.sample.responseTurn)).toEqual([4]);
    ws.close();
  });
});

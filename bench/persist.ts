// Persistence benchmark (`npm run bench:persist`): how long one atomic save of a realistic
// database takes, and how many label edits per second the annotator gets when every edit is
// saved at once versus with the store's coalesced saving; and a heuristic judge run over every
// sample, its verdicts stored in batches (src-main/judge/runner.ts) versus one transaction (one
// fsynced journal line) each. Both ways are measured in this run on the same database, and the
// ratios are printed.
//
//   npm run bench:persist [-- --sessions 2000 --edits 2000]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { ImportedConversation } from '../src-shared/types.js';
import { Workspace } from '../src-main/workspace/workspace.js';
import { runJudge, type JudgeTarget } from '../src-main/judge/runner.js';
import { HeuristicJudge } from '../src-main/judge/verdicts.js';

const { values } = parseArgs({ options: { sessions: { type: 'string', default: '2000' }, edits: { type: 'string', default: '2000' } } });
const SESSIONS = Number(values.sessions);
const EDITS = Number(values.edits);

const WORDS = 'the a function list python value error sort return data model train label reply user thanks please use instead because when which file'.split(' ');

/** Deterministic pseudo-random text, so every run measures the same database. */
function makeText(seed: number, words: number): string {
  let x = seed * 2654435761 % 4294967296;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out.push(WORDS[x % WORDS.length]);
  }
  return out.join(' ');
}

function conversation(i: number): ImportedConversation {
  const turns: ImportedConversation['turns'] = [{ role: 'system', text: 'You are a helpful assistant.' }];
  const exchanges = 3 + (i % 5);
  for (let k = 0; k < exchanges; k++) {
    turns.push({ role: 'user', text: makeText(i * 100 + k, 15 + (k * 7) % 40), timestamp: 1.7e9 + i * 100 + k });
    turns.push({ role: 'assistant', text: makeText(i * 100 + k + 50, 60 + (k * 37) % 200), timestamp: 1.7e9 + i * 100 + k + 1 });
  }
  turns.push({ role: 'user', text: k2(i) });
  return { externalId: `bench-${i}`, title: `Bench conversation ${i}`, createdAt: 1.7e9 + i * 100, turns, alternatives: [], metadata: {}, warnings: [] };
}
const k2 = (i: number) => (i % 3 === 0 ? 'No, I said use Python instead.' : i % 3 === 1 ? 'Perfect, thanks!' : 'ok, next question');

function ms(start: number): number {
  return performance.now() - start;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-bench-persist-'));
const dbPath = path.join(dir, 'bench.db');
const ws = await Workspace.open(dbPath);
const convs = Array.from({ length: SESSIONS }, (_, i) => conversation(i));
let t = performance.now();
await ws.importExport({ path: 'synthetic', format: 'openai', sha256: 'bench', warnings: [], conversations: () => convs });
const importMs = ms(t);
await runJudge(ws, new HeuristicJudge(), { hints: true, force: true });
const stats = ws.stats();
const store = ws.storage;
const size = fs.statSync(dbPath).size;
console.log(`database: ${stats.sessions} sessions, ${stats.turns} turns, ${stats.samples} samples, ${(size / 1e6).toFixed(1)} MB on disk (import ${importMs.toFixed(0)} ms)`);

// 1. One atomic save (export + temp file + fsync + rename + dir fsync).
const saveTimes: number[] = [];
for (let i = 0; i < 10; i++) {
  t = performance.now();
  store.flush(true);
  saveTimes.push(ms(t));
}
saveTimes.sort((a, b) => a - b);
const saveMedian = saveTimes[5];
console.log(`one save: median ${saveMedian.toFixed(1)} ms (min ${saveTimes[0].toFixed(1)}, max ${saveTimes[9].toFixed(1)}) for ${(size / 1e6).toFixed(1)} MB`);

const samples = ws.listSamples();
const target = (i: number) => samples[i % samples.length];

// 2. Saving after every edit.
const eagerEdits = Math.min(EDITS, 100);
t = performance.now();
for (let i = 0; i < eagerEdits; i++) {
  const s = target(i);
  ws.setLabel(s.sessionId, s.responseTurn, { reward: i % 2 ? 1 : -1, notes: `eager ${i}` });
  store.flush();
}
const eagerMs = ms(t);
const eagerRate = eagerEdits / (eagerMs / 1000);

// 3. Coalesced: edits mark the store dirty; one save covers the burst (here at the end, as
//    the debounce timer would once the user pauses). Each edit is still durable when it returns:
//    its line in the write journal is written and fsynced (src-main/store/write-journal.ts).
const savesBefore = store.persistStats.saves;
t = performance.now();
for (let i = 0; i < EDITS; i++) {
  const s = target(i);
  ws.setLabel(s.sessionId, s.responseTurn, { reward: i % 2 ? -1 : 1, notes: `coalesced ${i}` });
}
store.flush();
const coalescedMs = ms(t);
const coalescedRate = EDITS / (coalescedMs / 1000);
const coalescedSaves = store.persistStats.saves - savesBefore;

console.log(`save every edit:   ${eagerRate.toFixed(0)} labels/s (${eagerEdits} edits, ${(eagerMs / eagerEdits).toFixed(1)} ms each)`);
console.log(`coalesced saving:  ${coalescedRate.toFixed(0)} labels/s (${EDITS} edits, ${coalescedSaves} save(s), ${(coalescedMs / EDITS).toFixed(2)} ms each)`);
console.log(`ratio coalesced / every-edit: ${(coalescedRate / eagerRate).toFixed(1)}×`);
console.log(`a label edit costs ${((coalescedMs - saveMedian) / EDITS).toFixed(2)} ms (in memory and its journal line); a save ${saveMedian.toFixed(1)} ms, at most once per ${300} ms quiet period and within 2 s of an edit`);

// 4. A heuristic judge run over every sample (forced), its verdicts in batches, then one transaction each, alternating.
const oneEach: JudgeTarget = {
  judgeCandidates: () => ws.judgeCandidates(),
  recordJudgeVerdicts: (verdicts, provenance) => verdicts.map((v) => ws.recordJudgeVerdicts([v], provenance)[0]!),
  flush: () => ws.flush(),
};
const judgeTimes: Record<'batches' | 'one each', number[]> = { batches: [], 'one each': [] };
for (let r = 0; r < 3; r++) {
  for (const [name, judgeTarget] of [['batches', ws], ['one each', oneEach]] as const) {
    t = performance.now();
    await runJudge(judgeTarget, new HeuristicJudge(), { hints: true, force: true });
    judgeTimes[name].push(ms(t));
  }
}
const judgeMedian = (name: keyof typeof judgeTimes) => [...judgeTimes[name]].sort((a, b) => a - b)[1]!;
console.log(`heuristic judge over ${samples.length} samples: verdicts in batches ${(judgeMedian('batches') / 1000).toFixed(2)} s, one transaction each ${(judgeMedian('one each') / 1000).toFixed(2)} s (medians of 3, alternating): ×${(judgeMedian('one each') / judgeMedian('batches')).toFixed(1)}`);

ws.close();
fs.rmSync(dir, { recursive: true, force: true });

/**
 * How SmolLM2-135M-Instruct judges (issue 30 item 4), for the README's real-model figures:
 *
 *   demo data   the labels scripts/smollm2-loop.sh's judge step left in its database: the share of
 *               votes with a readable verdict (the parse rate), and agreement with the heuristic
 *               judge on the same replies and reactions;
 *   corpus      the first N held-out rows of the hand-labelled feedback corpus
 *               (test/fixtures/feedback/corpus.jsonl, as bench:judge splits it), judged here by
 *               SmolLM2 with the loop's settings (1 vote, 96 tokens): parse rate, agreement with
 *               the hand labels and with the heuristic, and the heuristic's own on those rows.
 *
 *   npx tsx bench/smollm2-judge.ts [DB] [N]    (defaults: the loop's database, 24)
 */
import path from 'node:path';
import type { Reward } from '../src-shared/types.js';
import { readCorpus, predict } from '../bench/judge-metrics.js';
import { heuristicReward } from '../src-main/judge/heuristic.js';
import { openCompleter } from '../src-main/judge/backends.js';
import { LlmJudge } from '../src-main/judge/llm-judge.js';
import { parseRewardAnswer } from '../src-main/judge/parse.js';
import { withWorkspace } from '../src-main/workspace/workspace.js';

const MODEL = path.resolve('.cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf');
const db = process.argv[2] ?? 'bench/output/smollm2-loop/loop.db';
const n = Number(process.argv[3] ?? 24);
const pct = (a: number, b: number) => `${b ? ((100 * a) / b).toFixed(0) : '—'}% (${a}/${b})`;
const count = (xs: Reward[]) => `+1 ${xs.filter((x) => x === 1).length}, 0 ${xs.filter((x) => x === 0).length}, −1 ${xs.filter((x) => x === -1).length}`;

// The demo data, as the loop's judge left it.
const samples = await withWorkspace(db, (ws) => ws.listSamples(), { access: 'read' });
const judged = samples.filter((s) => s.label.source?.startsWith('judge:') && s.feedback !== null);
const votes = judged.flatMap((s) => s.label.votes);
const parsed = votes.filter((v) => v.reward !== undefined).length;
const agreeHeuristic = judged.filter((s) => heuristicReward(s.response, { role: s.nextStateRole ?? 'user', text: s.feedback! }).reward === s.label.reward).length;
console.log(`demo data (${db}): ${judged.length} samples judged by ${judged[0]?.label.source ?? '—'}: ${count(judged.map((s) => s.label.reward!))}`);
console.log(`  parse rate ${pct(parsed, votes.length)} of votes; agreement with the heuristic ${pct(agreeHeuristic, judged.length)}`);

// The hand-labelled corpus: the first n held-out rows.
const rows = readCorpus().filter((r) => r.split === 'heldout').slice(0, n);
const heuristic = predict(rows);
const judge = new LlmJudge(await openCompleter({ backend: 'local', modelDir: MODEL }), { maxTokens: 96 });
let corpusParsed = 0, agreeHand = 0, agreeH = 0;
const started = Date.now();
try {
  for (const [i, row] of rows.entries()) {
    const v = await judge.judge({
      sessionId: row.id, responseTurn: 1,
      context: [], response: row.reply, responseMessage: { role: 'assistant', content: row.reply },
      nextState: { role: row.role ?? 'user', text: row.reaction },
    }, { votes: 1, hints: false });
    if (v.votes.some((x) => parseRewardAnswer(x.raw) !== undefined)) corpusParsed++;
    if (v.reward === row.label) agreeHand++;
    if (v.reward === heuristic[i]!.predicted) agreeH++;
    // A running tally, so a run stopped early still says what it measured.
    console.log(`  ${i + 1}/${rows.length} ${row.id}: hand ${row.label}, heuristic ${heuristic[i]!.predicted}, SmolLM2 ${v.reward}${v.votes.some((x) => x.reward !== undefined) ? '' : ' (unparsed)'}; so far parsed ${corpusParsed}, agree hand ${agreeHand}, agree heuristic ${agreeH}`);
  }
} finally {
  await judge.close();
}
const heuristicHand = heuristic.filter((p) => p.predicted === p.row.label).length;
console.log(`\ncorpus: the first ${rows.length} held-out rows (${count(rows.map((r) => r.label))} by hand), 1 vote of ≤ 96 tokens each, ${((Date.now() - started) / 1000 / rows.length).toFixed(1)} s a row`);
console.log(`  parse rate ${pct(corpusParsed, rows.length)}; agreement with the hand labels ${pct(agreeHand, rows.length)}, with the heuristic ${pct(agreeH, rows.length)}; the heuristic's with the hand labels ${pct(heuristicHand, rows.length)}`);

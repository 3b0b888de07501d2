/**
 * Heuristic judge benchmark (`npm run bench:judge [-- --misses]`): scores the heuristic
 * (src-main/judge/heuristic.ts) against the hand-labelled corpus in test/fixtures/feedback/.
 * Prints, for the held-out split (the reported figure) and then the tune split (the one the
 * cues were tuned on, labelled as such), the agreement, the wrong-sign rate (+1 where -1 is
 * right, or the reverse) and the confusion matrix, overall and per language. `--misses` also
 * lists the tune rows the heuristic gets wrong (never the held-out ones: reading those would
 * be tuning on them). Not part of `npm test`; test/judge/corpus.test.ts
 * holds the same figures to their targets.
 */
import { readCorpus, scoreSplit, type Scores, type Split } from './judge-metrics.js';

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

function line(name: string, s: Scores): string {
  return `${name.padEnd(8)} n=${String(s.n).padStart(3)}  agreement ${pct(s.agreement).padStart(6)} (${s.agree}/${s.n})  wrong sign ${pct(s.wrongSignRate).padStart(5)} (${s.wrongSign})`;
}

function matrix(s: Scores): string[] {
  const out = ['           predicted  +1    0   -1'];
  for (const truth of ['1', '0', '-1']) {
    const row = s.confusion[truth]!;
    out.push(`  truth ${truth.padStart(2)}           ${['1', '0', '-1'].map((p) => String(row[p]).padStart(4)).join(' ')}`);
  }
  return out;
}

function report(split: Split, title: string, showMisses: boolean): void {
  const { overall, byLang, predictions } = scoreSplit(readCorpus(), split);
  console.log(`\n== ${title} ==`);
  console.log(line('overall', overall));
  for (const l of matrix(overall)) console.log(l);
  for (const [lang, s] of byLang) {
    console.log(line(lang, s));
    console.log(`         confusion (truth→predicted +1/0/-1): ${['1', '0', '-1'].map((t) => `${t}: ${['1', '0', '-1'].map((p) => s.confusion[t]![p]).join('/')}`).join('  ')}`);
  }
  if (!showMisses) return;
  for (const p of predictions.filter((p) => p.predicted !== p.row.label)) {
    console.log(`  miss ${p.row.id.padEnd(14)} truth ${String(p.row.label).padStart(2)} got ${String(p.predicted).padStart(2)} (${p.confidence.toFixed(2)})  ${JSON.stringify(p.row.reaction).slice(0, 90)}  ${p.evidence.join('; ')}`);
  }
}

const showMisses = process.argv.includes('--misses');
report('heldout', 'held-out split (the reported figure; never tuned on)', false);
report('tune', 'tune split (the cues were tuned on these rows)', showMisses);

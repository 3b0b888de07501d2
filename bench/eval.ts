/**
 * `npm run bench:eval` — what evaluation costs per held-out sample (docs/design.md §Evaluation),
 * on the demo model (stories260K) and on a random Llama-shaped model of ~125M parameters
 * (the shape bench/model.ts uses), on the CPU EP.
 *
 * It goes through the same functions as `hindsight eval`: held-out samples → rows through the
 * chat template (src-main/train/eval-rows.ts) → the forward-only LoRA scorer
 * (src-main/train/lora-scorer.ts), for
 *   likelihood   one pass over each sample's reply, per model (base, or an adapter: the same cost);
 *   hints        the teacher pass (base model, hint in the context), once per evaluation,
 *                plus one student pass per model, on hinted samples.
 * The adapter is a fresh LoRA (r 16, all seven projections) whose B is zero; its cost is that
 * of a trained one. Replay costs generation plus judging and belongs to the replay judge.
 *
 * Options (env): BENCH_THREADS (default: all cores), BENCH_SAMPLES (16), BENCH_BATCH (8),
 * BENCH_CONTEXT_TURNS (6: the 125M model's rows are then about 300 tokens).
 * Writes the random model to bench/output/ (git-ignored), reused across runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TrainingSample } from '../src-shared/views.js';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import { ChatTokenizer } from '../src-main/model/tokenizer.js';
import { evalRowsFromSamples, sampleScores, teacherLogprobs, type EvalRow } from '../src-main/train/eval-rows.js';
import { DEFAULT_LORA, initLora, loraSpecs } from '../src-main/train/lora.js';
import { LoraScorer } from '../src-main/train/lora-scorer.js';
import { writeTinyModel } from '../tools/tiny-models.js';
import { LLAMA_125M } from './random-model.js';

const OUT = path.resolve('bench/output');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 16);
const BATCH = Number(process.env.BENCH_BATCH ?? 8);
const CONTEXT_TURNS = Number(process.env.BENCH_CONTEXT_TURNS ?? 6);

const fmt = (x: number, d = 1) => x.toFixed(d);

/** Held-out samples like a user's: a few turns of context, a reply, a label, half of them with a hint. */
function heldOutSamples(): TrainingSample[] {
  return Array.from({ length: SAMPLES }, (_, k) => {
    const messages = Array.from({ length: CONTEXT_TURNS }, (_, t) => ({
      role: t % 2 === 0 ? ('user' as const) : ('assistant' as const),
      content: t % 2 === 0 ? `Tell me more about the cat who ${['sat', 'slept', 'ran', 'played'][t % 4]} in the garden, part ${k}.` : 'The cat sat in the warm sun and watched the birds fly over the old stone wall.',
    }));
    return {
      sessionId: `bench:${k}`, responseTurn: CONTEXT_TURNS, messages,
      response: { role: 'assistant', content: `Once upon a time a little cat named Tom found a red ball under the bed, story ${k}. He was very happy.` },
      reward: k % 2 === 0 ? 1 : -1, hint: k % 2 === 0 ? 'Name the cat Tom and keep it short.' : null, repair: null, keptByAtLeastOne: false,
    };
  });
}

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - t };
}

async function benchModel(label: string, dir: string): Promise<void> {
  const checkpoint = Checkpoint.open(dir);
  const tokenizer = ChatTokenizer.load(dir);
  const { rows } = evalRowsFromSamples(heldOutSamples(), tokenizer, Math.min(512, checkpoint.config.maxPositionEmbeddings));
  const hinted = rows.filter((r) => r.teacher);
  const tokens = rows.reduce((a, r) => a + r.student.inputIds.length, 0) / rows.length;
  const built = await timed(() => LoraScorer.create(checkpoint, DEFAULT_LORA, { device: 'cpu', threads: THREADS, batchSize: BATCH }));
  const scorer = built.value;
  const specs = loraSpecs(checkpoint.config, DEFAULT_LORA.targets);
  const adapter = initLora(specs, DEFAULT_LORA.r, 1);
  try {
    const score = (weights: typeof adapter | null) => (spans: Parameters<LoraScorer['score']>[0]) => scorer.score(spans, weights);
    const none = rows.map(() => undefined);
    await sampleScores(rows.slice(0, BATCH), score(null), none); // warm-up
    const base = await timed(() => sampleScores(rows, score(null), none));
    const withAdapter = await timed(() => sampleScores(rows, score(adapter), none));
    const teacher = await timed(() => teacherLogprobs(hinted, score(null)));
    const student = await timed(() => sampleScores(hinted, score(adapter), teacher.value));
    const per = (ms: number, rs: EvalRow[]) => fmt(ms / rs.length, 1);
    console.log(`\n## ${label}: ${rows.length} samples of ${fmt(tokens, 0)} tokens on average, batch ${BATCH}, ${THREADS} threads`);
    console.log(`graph and session: ${fmt(built.ms / 1000, 2)} s, once per evaluation (per adapter shape)`);
    console.log(`likelihood   base ${per(base.ms, rows)} ms/sample | adapter ${per(withAdapter.ms, rows)} ms/sample`);
    console.log(`hints        teacher ${per(teacher.ms, hinted)} ms/hinted sample (once) | student ${per(student.ms, hinted)} ms/hinted sample per model`);
  } finally {
    await scorer.close();
  }
}

async function main(): Promise<void> {
  console.log(`# bench:eval — ${os.cpus()[0]?.model ?? 'cpu'}, ${os.cpus().length} cores, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  await benchModel('stories260K (demo model)', path.resolve('resources/models/stories260K'));
  const dir = path.join(OUT, 'llama-125m');
  if (!fs.existsSync(path.join(dir, 'model.safetensors'))) {
    const t = Date.now();
    writeTinyModel(dir, LLAMA_125M);
    console.log(`\nwrote random model to ${dir} in ${fmt((Date.now() - t) / 1000)} s`);
  }
  await benchModel('random Llama 125M (hidden 768, 12 layers, vocab 32000, fp32)', dir);
}

await main();

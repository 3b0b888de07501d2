/**
 * `npm run bench:model` — scoring and generation speed of the ONNX Runtime decoder on CPU,
 * on a random Llama-shaped model of ~125M parameters, against PyTorch doing the same work in
 * the same run with the same thread count (bench/model_torch.py, a plain-torch decoder), under
 * .python/'s PyTorch (PyPI's torch 2.x; Debian's python3-torch where .python/ is missing).
 *
 * Also a correctness cross-check the tests cannot fake: the tiny Llama / Qwen2 / Qwen3 test
 * models scored by both, and the big model's log-probs and greedy tokens compared.
 *
 * Each figure is the median of BENCH_REPEATS runs (3) after a warm-up, wall seconds with the
 * process's CPU seconds beside them, on both sides.
 *
 * Options (env): BENCH_THREADS (default: all cores), BENCH_SCORE_BATCH (4), BENCH_SCORE_LEN (256),
 * BENCH_NEW_TOKENS (64), BENCH_REPEATS (3). Writes models to bench/output/ (git-ignored), reused across runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { LocalModel } from '../src-main/model/local-model.js';
import type { ScoreRow } from '../src-main/model/inference-engine.js';
import { seededRandom, writeTinyModel, type TinyModelOptions } from '../tools/tiny-models.js';
import { LLAMA_125M } from './random-model.js';
import { findTorchPython, torchThreadEnv } from './watched-process.js';

const OUT = path.resolve('bench/output');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const BATCH = Number(process.env.BENCH_SCORE_BATCH ?? 4);
const LEN = Number(process.env.BENCH_SCORE_LEN ?? 256);
const NEW_TOKENS = Number(process.env.BENCH_NEW_TOKENS ?? 64);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);

interface Timed { wallS: number; cpuS: number }
interface TorchRun { wall_s: number; cpu_s: number }
const secs = (t: Timed) => `${t.wallS.toFixed(2)} s / ${t.cpuS.toFixed(2)} s CPU`;
const byWall = (a: Timed, b: Timed) => a.wallS - b.wallS;

/** The run of median wall time among `repeats` (the upper middle of an even count), with this process's CPU seconds. */
async function medianRun(repeats: number, work: () => Promise<unknown>): Promise<Timed> {
  const runs: Timed[] = [];
  for (let i = 0; i < repeats; i++) {
    const c0 = process.cpuUsage(), t0 = performance.now();
    await work();
    const c = process.cpuUsage(c0);
    runs.push({ wallS: (performance.now() - t0) / 1000, cpuS: (c.user + c.system) / 1e6 });
  }
  return runs.sort(byWall)[Math.floor(runs.length / 2)]!;
}
const torchMedian = (runs: TorchRun[]): Timed => runs.map((r) => ({ wallS: r.wall_s, cpuS: r.cpu_s })).sort(byWall)[Math.floor(runs.length / 2)]!;

function runTorch(python: string, request: Record<string, unknown>): Record<string, unknown> {
  const file = path.join(OUT, 'torch-request.json');
  fs.writeFileSync(file, JSON.stringify(request));
  // Same thread budget for torch's OpenMP pool and the BLAS it calls.
  const env = torchThreadEnv(Number(request.threads ?? 1));
  const r = spawnSync(python, [path.resolve('bench/model_torch.py'), file], { encoding: 'utf8', maxBuffer: 1 << 28, env });
  if (r.status !== 0) throw new Error(`model_torch.py failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const maxAbsDiff = (a: number[][], b: number[][]) => Math.max(...a.flatMap((row, i) => row.map((v, j) => Math.abs(v - b[i]![j]!))));
const fmt = (x: number, d = 1) => x.toFixed(d);

function paramCount(dir: string): number {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const { hidden_size: H, num_hidden_layers: L, num_attention_heads: nH, num_key_value_heads: nKV, head_dim: d, intermediate_size: I, vocab_size: V } = cfg;
  return 2 * V * H + L * (2 * H * nH * d + 2 * H * nKV * d + 3 * H * I + 2 * H) + H;
}

async function crossCheckTiny(python: string): Promise<void> {
  console.log('\n## Cross-check against PyTorch on the tiny test models');
  const variants: (TinyModelOptions & { label: string })[] = [
    { label: 'llama bf16 sharded', family: 'llama', dtype: 'BF16', shards: 2 },
    { label: 'qwen2 (qkv bias)', family: 'qwen2', seed: 3 },
    { label: 'qwen3 (qk-norm, tied)', family: 'qwen3', tie: true, seed: 4 },
  ];
  for (const v of variants) {
    const tiny = writeTinyModel(path.join(OUT, `tiny-${v.family}`), v);
    const model = await LocalModel.load(tiny.dir);
    try {
      const rows: ScoreRow[] = [
        model.tokenizer.encodeResponse([{ role: 'user', content: 'what is in the box?' }], 'a hat, a bat and a cat'),
        { inputIds: model.tokenizer.encode('the other one is shorter'), responseStart: 3 },
      ];
      const ours = await model.score(rows);
      const theirs = runTorch(python, { model: tiny.dir, threads: 1, rows: rows.map((r) => ({ input_ids: r.inputIds, response_start: r.responseStart })) });
      console.log(`${v.label.padEnd(24)} max |Δ logprob| = ${maxAbsDiff(ours, theirs.logprobs as number[][]).toExponential(2)}`);
    } finally {
      await model.close();
    }
  }
}

async function main(): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  const python = findTorchPython();
  console.log(`# bench:model — ${os.cpus()[0]?.model ?? 'cpu'}, ${os.cpus().length} cores, ${THREADS} threads, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  if (python) await crossCheckTiny(python);
  else console.log('(no Python with torch: PyTorch cross-check and ratios skipped; make .python/ with bash scripts/python-env.sh)');

  const dir = path.join(OUT, 'llama-125m');
  if (!fs.existsSync(path.join(dir, 'model.safetensors'))) {
    const t = Date.now();
    writeTinyModel(dir, LLAMA_125M);
    console.log(`\nwrote random model to ${dir} in ${fmt((Date.now() - t) / 1000)} s`);
  }
  console.log(`\n## Random Llama: ${fmt(paramCount(dir) / 1e6)}M parameters (hidden 768, 12 layers, 12 heads / 4 KV, vocab 32000), fp32`);

  const rand = seededRandom(11);
  const rows: ScoreRow[] = Array.from({ length: BATCH }, () => ({
    inputIds: Array.from({ length: LEN }, () => 3 + Math.floor(rand() * 31000)),
    responseStart: LEN / 2,
  }));
  const prompt = rows[0]!.inputIds.slice(0, 32);

  let t = Date.now();
  const model = await LocalModel.load(dir, { threads: THREADS, prepare: ['score', 'generate'] });
  const loadS = (Date.now() - t) / 1000;
  await model.score(rows.slice(0, 1));
  let ours: number[][] = [];
  const score = await medianRun(REPEATS, async () => (ours = await model.score(rows, { batchSize: BATCH })));
  await model.generate(prompt, { maxNewTokens: 2, stopTokenIds: [] });
  let gen = { tokens: [] as number[] };
  const generate = await medianRun(REPEATS, async () => (gen = await model.generate(prompt, { maxNewTokens: NEW_TOKENS, stopTokenIds: [] })));
  await model.close();
  const scoreTps = (BATCH * LEN) / score.wallS;
  const genTps = NEW_TOKENS / generate.wallS;
  console.log(`onnxruntime-node (${model.executionProvider}), medians of ${REPEATS}, wall / CPU seconds: load+graphs ${fmt(loadS)} s | score ${BATCH}×${LEN}: ${secs(score)} = ${fmt(scoreTps)} tokens/s | generate ${NEW_TOKENS} tokens (KV cache, greedy): ${secs(generate)} = ${fmt(genTps)} tokens/s`);

  if (!python) return;
  const torch = runTorch(python, {
    model: dir, threads: THREADS, score_repeats: REPEATS, new_tokens: NEW_TOKENS, prompt, generate_repeats: REPEATS,
    rows: rows.map((r) => ({ input_ids: r.inputIds, response_start: r.responseStart })),
  }) as { torch: string; threads: number; score_runs: TorchRun[]; generate_runs: TorchRun[]; logprobs: number[][]; generated: number[] };
  const tScore = torchMedian(torch.score_runs), tGen = torchMedian(torch.generate_runs);
  const tScoreTps = (BATCH * LEN) / tScore.wallS;
  const tGenTps = NEW_TOKENS / tGen.wallS;
  console.log(`PyTorch ${torch.torch} (${torch.threads} threads), the same:         score ${secs(tScore)} = ${fmt(tScoreTps)} tokens/s | generate ${secs(tGen)} = ${fmt(tGenTps)} tokens/s`);
  console.log(`ratio ORT / PyTorch (higher is faster): score ×${fmt(scoreTps / tScoreTps, 2)} (CPU ×${fmt(tScore.cpuS / score.cpuS, 2)}), generate ×${fmt(genTps / tGenTps, 2)} (CPU ×${fmt(tGen.cpuS / generate.cpuS, 2)})`);
  const same = gen.tokens.filter((tok, i) => tok === torch.generated[i]).length;
  console.log(`load average at end ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  console.log(`agreement: max |Δ logprob| = ${maxAbsDiff(ours, torch.logprobs).toExponential(2)} over ${BATCH * LEN / 2} tokens; greedy tokens identical: ${same}/${NEW_TOKENS}`);
}

await main();

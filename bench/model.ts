/**
 * `npm run bench:model` — scoring and generation speed of the ONNX Runtime decoder on CPU,
 * on a random Llama-shaped model of ~125M parameters, against PyTorch doing the same work in
 * the same run with the same thread count (bench/model_torch.py, a plain-torch decoder), under
 * .python/'s PyTorch (PyPI's torch 2.x; Debian's python3-torch where .python/ is missing).
 *
 * Also a correctness cross-check the tests cannot fake: the tiny Llama / Qwen2 / Qwen3 test
 * models scored by both, and the big model's log-probs and greedy tokens compared.
 *
 * Options (env): BENCH_THREADS (default: all cores), BENCH_SCORE_BATCH (4), BENCH_SCORE_LEN (256),
 * BENCH_NEW_TOKENS (64). Writes models to bench/output/ (git-ignored), reused across runs.
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
  let scoreS = Infinity;
  let ours: number[][] = [];
  for (let k = 0; k < 3; k++) {
    t = Date.now();
    ours = await model.score(rows, { batchSize: BATCH });
    scoreS = Math.min(scoreS, (Date.now() - t) / 1000);
  }
  await model.generate(prompt, { maxNewTokens: 2, stopTokenIds: [] });
  t = Date.now();
  const gen = await model.generate(prompt, { maxNewTokens: NEW_TOKENS, stopTokenIds: [] });
  const genS = (Date.now() - t) / 1000;
  await model.close();
  const scoreTps = (BATCH * LEN) / scoreS;
  const genTps = NEW_TOKENS / genS;
  console.log(`onnxruntime-node (${model.executionProvider}): load+graphs ${fmt(loadS)} s | score ${BATCH}×${LEN}: ${fmt(scoreS, 2)} s = ${fmt(scoreTps)} tokens/s | generate ${NEW_TOKENS} tokens (KV cache, greedy): ${fmt(genS, 2)} s = ${fmt(genTps)} tokens/s`);

  if (!python) return;
  const torch = runTorch(python, {
    model: dir, threads: THREADS, score_repeats: 3, new_tokens: NEW_TOKENS, prompt,
    rows: rows.map((r) => ({ input_ids: r.inputIds, response_start: r.responseStart })),
  }) as { torch: string; threads: number; score_s: number; generate_s: number; logprobs: number[][]; generated: number[] };
  const tScoreTps = (BATCH * LEN) / torch.score_s;
  const tGenTps = NEW_TOKENS / torch.generate_s;
  console.log(`PyTorch ${torch.torch} (${torch.threads} threads):      score ${fmt(torch.score_s, 2)} s = ${fmt(tScoreTps)} tokens/s | generate ${fmt(torch.generate_s, 2)} s = ${fmt(tGenTps)} tokens/s`);
  console.log(`ratio ORT / PyTorch (higher is faster): score ×${fmt(scoreTps / tScoreTps, 2)}, generate ×${fmt(genTps / tGenTps, 2)}`);
  const same = gen.tokens.filter((tok, i) => tok === torch.generated[i]).length;
  console.log(`agreement: max |Δ logprob| = ${maxAbsDiff(ours, torch.logprobs).toExponential(2)} over ${BATCH * LEN / 2} tokens; greedy tokens identical: ${same}/${NEW_TOKENS}`);
}

await main();

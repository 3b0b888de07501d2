/**
 * Where a measured run's time went, from ONNX Runtime's own profiles: the JSON traces that
 * sessions write when profiling is on (SessionConfig.profile, HINDSIGHT_ORT_PROFILE; one file
 * per session, written when it is released). bench/gpu.ts prints one summary per Hindsight row
 * under BENCH_PROFILE=1; on its own it sums a folder of them:
 *
 *   npx tsx bench/ort-profile.ts FOLDER [START_MS END_MS]
 *
 * The window (epoch milliseconds, the measured repetition a bench child reports) keeps the
 * session runs whose middle falls inside it, and their nodes: warm-up runs and loading are left
 * out. Each trace's `ts` counts microseconds from its own start, which ONNX Runtime writes into
 * the file name only (`<prefix>_YYYY-MM-DD_HH-MM-SS_<ms>.json`, local time), so that is the
 * anchor; a name without it can only be summed whole.
 *
 * On a GPU provider a node's time is the host's time in its Compute: kernels are queued, not
 * waited for, so the GPU's own time lands where the host waits for it, a MemcpyToHost node
 * (on WebGPU through lavapipe, 98% of a score's run) or the run's end (time in runs outside
 * kernels). CUDA_LAUNCH_BLOCKING=1 makes each CUDA launch wait, which puts each kernel's GPU
 * time on its node (and a launch's latency on every node).
 *
 * WebGPU does better: while profiling, its provider reads the GPU's timestamps around every
 * kernel it dispatches and writes them as "Api" events named `<node>&<op type>&<program>` (its
 * shader), their times on the GPU's own clock. They cannot be placed in the window by time, so
 * each one is given to a run by count: the n-th occurrence of an event name, in GPU time order,
 * is of the session's n-th run (a node dispatches its programs once a run). The summary then
 * has the GPU's own kernel time, by op type, by program, and by program and shapes (which
 * kernel, at which sizes, takes the time).
 */
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

/** A measured repetition, in epoch milliseconds (performance.timeOrigin + performance.now()). */
export interface ProfileWindow {
  startMs: number;
  endMs: number;
}

/** Now, in epoch milliseconds to a fraction (the clock ONNX Runtime's trace names are in). */
export const epochMs = () => performance.timeOrigin + performance.now();

/** Nodes and time of one op type or one execution provider. */
export interface ProfileGroup {
  key: string;
  nodes: number;
  ms: number;
  /** By op type: the providers its nodes ran on. */
  providers?: string[];
}

export interface ProfileSummary {
  /** The window's length, or the runs' time when summed whole. */
  wallMs: number;
  files: number;
  /** The kept runs by session, named by its graph (the trace's file name up to `-<pid>`): runs and their time. */
  bySession: ProfileGroup[];
  /** Session runs kept (model_run events) and their time. */
  runs: number;
  runMs: number;
  /** Σ of the kept runs' node kernel times. */
  kernelMs: number;
  byOp: ProfileGroup[];
  byProvider: ProfileGroup[];
  /** The Memcpy nodes ONNX Runtime puts between providers (MemcpyToHost, MemcpyFromHost). */
  copies: { nodes: number; ms: number; byOp: Record<string, number> };
  /** Files whose start time could not be read from their name (summed whole). */
  unanchored: string[];
  /** WebGPU's kernels timed on the GPU (its "Api" events) in the kept runs: their count and time, by op type, program, and program and shapes. */
  gpu: { kernels: number; ms: number; byOp: ProfileGroup[]; byProgram: ProfileGroup[]; byShape: ProfileGroup[] };
}

const US_PER_MS = 1000;
/** ONNX Runtime's name for a provider, without the suffix every one of them carries. */
export const shortProvider = (p: string) => p.replace(/ExecutionProvider$/, '');
const COPY_OPS = new Set(['MemcpyToHost', 'MemcpyFromHost']);
const GPU_PROVIDERS = new Set(['CUDA', 'WebGpu', 'Dml', 'ROCm', 'TensorRT']);

interface NodeEvent { ts: number; dur: number; op: string; provider: string }
interface RunEvent { ts: number; dur: number }
/** A kernel WebGPU timed on the GPU: `name` is `<node>&<op type>&<program>`, `ts` on the GPU's clock. */
interface GpuEvent { ts: number; dur: number; name: string; shapes: string }

/** The trace's start in epoch ms, from ONNX Runtime's file name (local time); undefined if the name has none. */
export function profileStartMs(file: string): number | undefined {
  const m = /_(\d{4})-(\d\d)-(\d\d)_(\d\d)-(\d\d)-(\d\d)_(\d+)\.json$/.exec(path.basename(file));
  if (!m) return undefined;
  const [y, mo, d, h, mi, s, ms] = m.slice(1).map(Number) as [number, number, number, number, number, number, number];
  return new Date(y, mo - 1, d, h, mi, s, ms).getTime();
}

/** A trace's runs and nodes, read a line at a time (ONNX Runtime writes one event a line; a decode's trace runs to hundreds of MB). */
async function readTrace(file: string): Promise<{ runs: RunEvent[]; nodes: NodeEvent[]; gpu: GpuEvent[] }> {
  const runs: RunEvent[] = [], nodes: NodeEvent[] = [], gpu: GpuEvent[] = [];
  const lines = readline.createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity });
  for await (const raw of lines) {
    const line = raw.trim().replace(/,$/, '');
    if (!line.startsWith('{')) continue; // the array's brackets
    const e = JSON.parse(line) as { cat?: string; name?: string; ts: number; dur: number; args?: { op_name?: string; provider?: string; shapes?: string } };
    if (e.cat === 'Session' && e.name === 'model_run') runs.push({ ts: e.ts, dur: e.dur });
    else if (e.cat === 'Node' && e.args?.op_name) nodes.push({ ts: e.ts, dur: e.dur, op: e.args.op_name, provider: shortProvider(e.args.provider ?? '?') });
    else if (e.cat === 'Api' && e.name?.includes('&')) gpu.push({ ts: e.ts, dur: e.dur, name: e.name, shapes: (e.args?.shapes ?? '').trim() });
  }
  return { runs, nodes, gpu };
}

/**
 * The GPU kernels of the runs numbered in `kept` (0-based, in run order): the n-th occurrence of
 * a name, in GPU time order, belongs to run ⌊n / m⌋, m being how many times a run dispatches it
 * (its occurrences ÷ the runs). A name whose count is no multiple of the runs is left out.
 */
function keptKernels(gpu: GpuEvent[], runs: number, kept: Set<number>): GpuEvent[] {
  const seen = new Map<string, number>(), total = new Map<string, number>();
  for (const e of gpu) total.set(e.name, (total.get(e.name) ?? 0) + 1);
  return [...gpu].sort((a, b) => a.ts - b.ts).filter((e) => {
    const n = seen.get(e.name) ?? 0;
    seen.set(e.name, n + 1);
    const perRun = total.get(e.name)! / runs;
    return Number.isInteger(perRun) && kept.has(Math.floor(n / perRun));
  });
}

/** The profile files in `folder` (ONNX Runtime's traces; anything else is skipped). */
export function profileFiles(folder: string): string[] {
  return fs.existsSync(folder) ? fs.readdirSync(folder).filter((f) => f.endsWith('.json')).sort().map((f) => path.join(folder, f)) : [];
}

/** Adds a node of `dur` µs to its group (summed in whole µs, made ms at the end, so sums are exact). */
function add(groups: Map<string, ProfileGroup>, key: string, dur: number, provider?: string): void {
  const g = groups.get(key) ?? { key, nodes: 0, ms: 0, ...(provider ? { providers: [] } : {}) };
  g.nodes++;
  g.ms += dur;
  if (provider && !g.providers!.includes(provider)) g.providers!.push(provider);
  groups.set(key, g);
}

/** Sums the traces in `folder`: the runs inside `window` when given (see the header), else every run. */
export async function summariseProfiles(folder: string, window?: ProfileWindow): Promise<ProfileSummary> {
  const byOp = new Map<string, ProfileGroup>(), byProvider = new Map<string, ProfileGroup>();
  const copies = { nodes: 0, ms: 0, byOp: {} as Record<string, number> };
  const unanchored: string[] = [];
  const bySession = new Map<string, ProfileGroup>();
  const gpuByOp = new Map<string, ProfileGroup>(), gpuByProgram = new Map<string, ProfileGroup>(), gpuByShape = new Map<string, ProfileGroup>();
  let runs = 0, runUs = 0, kernelUs = 0, gpuKernels = 0, gpuUs = 0;
  const files = profileFiles(folder);
  for (const file of files) {
    const trace = await readTrace(file);
    const start = profileStartMs(file);
    if (window && start === undefined) unanchored.push(path.basename(file));
    const ordered = [...trace.runs].sort((a, b) => a.ts - b.ts);
    const keep = (r: RunEvent) => !window || start === undefined || inWindow(start + (r.ts + r.dur / 2) / US_PER_MS, window);
    const kept = ordered.filter(keep);
    for (const k of keptKernels(trace.gpu, ordered.length, new Set(ordered.flatMap((r, i) => (keep(r) ? [i] : []))))) {
      const [, op = '?', program = '?'] = k.name.split('&');
      gpuKernels++;
      gpuUs += k.dur;
      add(gpuByOp, op, k.dur);
      add(gpuByProgram, program, k.dur);
      add(gpuByShape, `${program}: ${k.shapes}`, k.dur);
    }
    runs += kept.length;
    for (const r of kept) {
      runUs += r.dur;
      add(bySession, graphOf(file), r.dur);
    }
    for (const n of trace.nodes) {
      if (!insideAny(n.ts, kept)) continue;
      kernelUs += n.dur;
      add(byOp, n.op, n.dur, n.provider);
      add(byProvider, n.provider, n.dur);
      if (COPY_OPS.has(n.op)) {
        copies.nodes++;
        copies.ms += n.dur;
        copies.byOp[n.op] = (copies.byOp[n.op] ?? 0) + 1;
      }
    }
  }
  const byTime = (a: ProfileGroup, b: ProfileGroup) => b.ms - a.ms;
  const inMs = (groups: Map<string, ProfileGroup>) => [...groups.values()].map((g) => ({ ...g, ms: g.ms / US_PER_MS })).sort(byTime);
  return {
    wallMs: window ? window.endMs - window.startMs : runUs / US_PER_MS,
    files: files.length, runs, runMs: runUs / US_PER_MS, kernelMs: kernelUs / US_PER_MS,
    bySession: inMs(bySession), byOp: inMs(byOp), byProvider: inMs(byProvider), copies: { ...copies, ms: copies.ms / US_PER_MS }, unanchored,
    gpu: { kernels: gpuKernels, ms: gpuUs / US_PER_MS, byOp: inMs(gpuByOp), byProgram: inMs(gpuByProgram), byShape: inMs(gpuByShape) },
  };
}

/** The graph a trace is of: SessionConfig.profile names it `<graph>-<pid>-<thread>-<n>_<time>.json`. */
const graphOf = (file: string) => path.basename(file).replace(/(-\d+-\d+-\d+)?_[\d_-]+\.json$/, '');

const inWindow = (ms: number, w: ProfileWindow) => ms >= w.startMs && ms <= w.endMs;

/** Whether `ts` falls in one of `runs` (sorted by start, not overlapping: one session runs one thing at a time). */
function insideAny(ts: number, runs: RunEvent[]): boolean {
  let lo = 0, hi = runs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const r = runs[mid]!;
    if (ts < r.ts) hi = mid - 1;
    else if (ts > r.ts + r.dur) lo = mid + 1;
    else return true;
  }
  return false;
}

const ms = (x: number) => `${x.toFixed(1)} ms`;
const share = (x: number, of: number) => (of > 0 ? `${((100 * x) / of).toFixed(1)}%` : '—');

/** The summary as the bench prints it: the time split, copies, then providers and the top `top` op types by time. */
export function formatProfile(title: string, s: ProfileSummary, top = 15): string {
  const w = s.wallMs;
  const lines = [`\n### Profile: ${title}: ${ms(w)}${s.runs ? '' : ' (no session runs in the window)'}`, ''];
  lines.push(`- ${s.runs} session runs in ${s.files} trace file(s): ${ms(s.runMs)} (${share(s.runMs, w)}); in node kernels ${ms(s.kernelMs)} (${share(s.kernelMs, w)}); in runs outside kernels ${ms(s.runMs - s.kernelMs)} (${share(s.runMs - s.kernelMs, w)}); outside runs (JavaScript: feeds, outputs, the host's optimizer) ${ms(Math.max(0, w - s.runMs))} (${share(Math.max(0, w - s.runMs), w)})`);
  if (s.bySession.length) lines.push(`- by session: ${s.bySession.map((g) => `${g.key} ${g.nodes} run${g.nodes === 1 ? '' : 's'}, ${ms(g.ms)}`).join('; ')}`);
  const copyOps = Object.entries(s.copies.byOp).map(([op, n]) => `${op} ${n}`).join(', ');
  lines.push(`- copies between providers: ${s.copies.nodes} Memcpy nodes${copyOps ? ` (${copyOps})` : ''}, ${ms(s.copies.ms)} (${share(s.copies.ms, w)})`);
  if (s.byProvider.some((g) => GPU_PROVIDERS.has(g.key))) {
    lines.push('- on a GPU a node\'s time is its launch on the host: the GPU\'s own time lands where the host waits for it (a MemcpyToHost node, or outside kernels at a run\'s end), unless CUDA_LAUNCH_BLOCKING=1 made each CUDA launch wait');
  }
  if (s.unanchored.length) lines.push(`- summed whole (no start time in the name): ${s.unanchored.join(', ')}`);
  lines.push('', '| provider | nodes | time | share of wall |', '|---|---|---|---|');
  for (const g of s.byProvider) lines.push(`| ${g.key} | ${g.nodes} | ${ms(g.ms)} | ${share(g.ms, w)} |`);
  lines.push('', `| op type (top ${top}) | providers | nodes | time | share of wall |`, '|---|---|---|---|---|');
  for (const g of s.byOp.slice(0, top)) lines.push(`| ${g.key} | ${g.providers!.join(', ')} | ${g.nodes} | ${ms(g.ms)} | ${share(g.ms, w)} |`);
  if (s.gpu.kernels) {
    lines.push('', `- on the GPU's own clock (WebGPU's timestamps): ${s.gpu.kernels} kernels, ${ms(s.gpu.ms)} (${share(s.gpu.ms, w)} of wall)`);
    for (const [what, groups] of [['op type', s.gpu.byOp], ['program', s.gpu.byProgram], ['program and shapes', s.gpu.byShape]] as const) {
      lines.push('', `| GPU time by ${what} (top ${top}) | kernels | time | share of GPU time |`, '|---|---|---|---|');
      for (const g of groups.slice(0, top)) lines.push(`| ${g.key} | ${g.nodes} | ${ms(g.ms)} | ${share(g.ms, s.gpu.ms)} |`);
    }
  }
  return lines.join('\n');
}

if (process.argv[1]?.endsWith('ort-profile.ts')) {
  const [folder, start, end] = process.argv.slice(2);
  if (!folder) {
    console.error('usage: npx tsx bench/ort-profile.ts FOLDER [START_MS END_MS]');
    process.exit(2);
  }
  const window = start && end ? { startMs: Number(start), endMs: Number(end) } : undefined;
  console.log(formatProfile(window ? `${folder}, ${start}–${end}` : `${folder}, every run`, await summariseProfiles(folder, window)));
}

/**
 * `npx tsx bench/qlora-backward.ts` — the design question of docs/design.md §QLoRA: how the
 * backward pass gets dX = dY·W through a frozen linear whose W is kept as MatMulNBits codes
 * (which compute A·dequant(B)ᵀ only). One Qwen3-0.6B layer's seven projections (q 1024→2048,
 * k, v 1024→1024, o 2048→1024, gate, up 1024→3072, down 3072→1024), M = 2,048 rows of dY, each
 * way in a child process of its own (peak RSS its own), median of BENCH_REPEATS runs:
 *
 *   fp32        Gemm(dY, Wᵀ, transB): the fp32 trainer's own backward (the reference)
 *   dequantise  (a) the layer's W dequantised in the graph from its codes, one MatMul, freed:
 *               what graph/ops/quantized.ts does
 *   transposed  (b) a second quantised copy, of Wᵀ in blocks along N, through MatMulNBits
 *               (accuracy_level 0; and 4, int8 activations)
 *
 * and each way's error against dY·dequant(W), the gradient of the function the forward computes.
 * Options (env): BENCH_THREADS (2), BENCH_REPEATS (3), BENCH_ROWS (2048), BENCH_BITS (4,8).
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { GraphBuilder, int, type Graph } from '../src-main/graph/ir.js';
import { dequantizeNBits } from '../src-main/graph/ops/quantized.js';
import { serializeModel } from '../src-main/graph/onnx.js';
import { dequantize, quantizeBlockwise, QUANT_BLOCK_SIZE, type QuantScheme } from '../src-main/model/quantize.js';
import { transpose2dF32 } from '../src-main/model/decoder.js';
import { seededRandom } from '../src-main/model/sampling.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const ROWS = Number(process.env.BENCH_ROWS ?? 2048);
const BITS = (process.env.BENCH_BITS ?? '4,8').split(',').map(Number) as (4 | 8)[];
/** [name, out N, in K] of one Qwen3-0.6B layer. */
const LINEARS: [string, number, number][] = [['q', 2048, 1024], ['k', 1024, 1024], ['v', 1024, 1024], ['o', 1024, 2048], ['gate', 3072, 1024], ['up', 3072, 1024], ['down', 1024, 3072]];
type Way = 'fp32' | 'dequantise' | 'transposed' | 'transposed4';
const WAYS: Way[] = ['fp32', 'dequantise', 'transposed', 'transposed4'];

function randomMatrix(n: number, seed: number, std = 0.02): Float32Array {
  const rand = seededRandom(seed);
  return Float32Array.from({ length: n }, () => (rand() * 2 - 1) * std * Math.sqrt(3));
}

/** The graph of one layer's seven dX products by `way`; returns it and, per linear, the exact dY·dequant(W). */
function layerGraph(way: Way, bits: 4 | 8): { graph: Graph; exact: Float32Array[] } {
  const b = new GraphBuilder(`dx_${way}`);
  const scheme: QuantScheme = { bits, blockSize: QUANT_BLOCK_SIZE, accuracyLevel: way === 'transposed4' ? 4 : 0 };
  const exact: Float32Array[] = [];
  LINEARS.forEach(([name, n, k], i) => {
    const dy = b.input(`dy_${name}`, 'float32', [ROWS, n]);
    const w = randomMatrix(n * k, 100 + i);
    const q = quantizeBlockwise(w, n, k, scheme);
    const wq = dequantize(q, n, k, scheme); // what the forward multiplies by
    exact.push(wq);
    let dx: string;
    if (way === 'fp32') {
      const wt = b.initializer(`${name}.T`, { dtype: 'float32', dims: [k, n], data: transpose2dF32(wq, n, k) });
      dx = b.op('Gemm', [dy, wt], { transB: int(1) }, 1, [{ dtype: 'float32', shape: [ROWS, k] }])[0]!;
    } else if (way === 'dequantise') {
      const attrs = { K: int(k), N: int(n), bits: int(bits), block_size: int(QUANT_BLOCK_SIZE), accuracy_level: int(0) };
      const init = (part: 'codes' | 'scales' | 'zeroPoints') => b.initializer(`${name}.${part}`, q[part]);
      dx = b.matmul(dy, dequantizeNBits(b, { codes: init('codes'), scales: init('scales'), zeroPoints: init('zeroPoints') }, attrs, dy));
    } else {
      // Wᵀ [k, n] quantised along n: MatMulNBits(dY, ·) = dY · dequant(Wᵀ codes)ᵀ ≈ dY · W.
      const t = quantizeBlockwise(transpose2dF32(w, n, k), k, n, scheme);
      const init = (part: 'codes' | 'scales' | 'zeroPoints') => b.initializer(`${name}.t.${part}`, t[part]);
      dx = b.contribOp('MatMulNBits', [dy, init('codes'), init('scales'), init('zeroPoints')], {
        K: int(n), N: int(k), bits: int(bits), block_size: int(QUANT_BLOCK_SIZE), accuracy_level: int(scheme.accuracyLevel),
      }, { dtype: 'float32', shape: [ROWS, k] });
    }
    b.output(b.identityAs(dx, `dx_${name}`));
  });
  return { graph: b.graph, exact };
}

interface ChildOut { wallMs: number; cpuMs: number; peakMb: number; loadedMb: number; relError: number }

async function child(way: Way, bits: 4 | 8): Promise<ChildOut> {
  const { graph, exact } = layerGraph(way, bits);
  const session = await ort.InferenceSession.create(serializeModel(graph), { intraOpNumThreads: THREADS, graphOptimizationLevel: 'all' });
  const loadedMb = process.memoryUsage().rss / 2 ** 20;
  const feeds: Record<string, ort.Tensor> = {};
  const dys = LINEARS.map(([name, n], i) => {
    const dy = randomMatrix(ROWS * n, 900 + i, 1);
    feeds[`dy_${name}`] = new ort.Tensor('float32', dy, [ROWS, n]);
    return dy;
  });
  const wall: number[] = [], cpu: number[] = [];
  let out: ort.InferenceSession.OnnxValueMapType | undefined;
  for (let r = 0; r <= REPEATS; r++) {
    const t0 = performance.now(), c0 = process.cpuUsage();
    out = await session.run(feeds);
    const c = process.cpuUsage(c0);
    if (r > 0) (wall.push(performance.now() - t0), cpu.push((c.user + c.system) / 1000));
  }
  // The error against dY·dequant(W) on 64 rows of each product, relative in norm.
  let err = 0, norm = 0;
  LINEARS.forEach(([name, n, k], i) => {
    const got = out![`dx_${name}`]!.data as Float32Array;
    for (let row = 0; row < 64; row++) {
      for (let col = 0; col < k; col++) {
        let s = 0;
        for (let j = 0; j < n; j++) s += dys[i]![row * n + j]! * exact[i]![j * k + col]!;
        err += (got[row * k + col]! - s) ** 2;
        norm += s * s;
      }
    }
  });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { wallMs: median(wall), cpuMs: median(cpu), peakMb: process.resourceUsage().maxRSS / 1024, loadedMb, relError: Math.sqrt(err / norm) };
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--child');
  if (at >= 0) {
    const [way, bits] = process.argv[at + 1]!.split(':') as [Way, string];
    console.log(JSON.stringify(await child(way, Number(bits) as 4 | 8)));
    return;
  }
  console.log(`dX = dY·W for one Qwen3-0.6B layer's seven projections, ${ROWS} rows, ${THREADS} threads, median of ${REPEATS} (28 layers: ×28 per step)`);
  for (const bits of BITS) {
    const rows = WAYS.map((way) => {
      const r = spawnSync(process.execPath, [...process.execArgv, path.resolve('bench/qlora-backward.ts'), '--child', `${way}:${bits}`], { encoding: 'utf8' });
      const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
      if (r.status !== 0 || !line) throw new Error(`${way} int${bits}: ${r.stderr.slice(-1500)}`);
      return [way, JSON.parse(line) as ChildOut] as const;
    });
    const ref = rows[0]![1];
    for (const [way, r] of rows) {
      console.log(`int${bits} ${way}: ${r.wallMs.toFixed(0)} ms (${r.cpuMs.toFixed(0)} ms CPU, ${(r.cpuMs / ref.cpuMs).toFixed(2)}× fp32's CPU), ` +
        `RSS after load ${r.loadedMb.toFixed(0)} MB, peak ${r.peakMb.toFixed(0)} MB; error vs dY·dequant(W) ${r.relError.toExponential(1)}`);
    }
  }
}

await main();

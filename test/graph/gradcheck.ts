/**
 * Finite-difference checks of gradient graphs, run in ONNX Runtime.
 *
 * A case builds `y = f(inputs)` with the graph builder. The check differentiates the scalar
 * L = Σ y·W, with W a fixed random tensor (so every element of y matters, with a different
 * weight), and compares each element of the analytic gradient of every float input against
 * the central difference (L(x+h) − L(x−h)) / 2h of the same fp32 graph.
 *
 * Why fp32 differences are good enough: the cases are small (tens of elements) with values of
 * order 1, so the rounding noise in L (~1e-7·|L|) divided by 2h stays near 1e-5, and h is small
 * enough that the truncation error (h²·f‴/6) stays near 1e-5 too; the tolerance
 * (atol + rtol·|fd|) sits two orders above both and far below any wrong rule's error.
 */
import ort from 'onnxruntime-node';
import { GraphBuilder, int, type DType, type Shape } from '../../src-main/graph/ir.js';
import { serializeModel } from '../../src-main/graph/onnx.js';
import { appendGradients } from '../../src-main/graph/autodiff.js';
import { seededRandom } from '../../tools/tiny-models.js';

export interface CaseInput {
  name: string;
  dtype?: DType; // default float32
  /** The shape declared in the graph (symbolic dims allowed). */
  shape: Shape;
  /** The run-time dims. Default: `shape` (must then be static). */
  dims?: number[];
  /** Values; default: uniform in [-1, 1] from the case's seed (float) . */
  data?: number[];
  /** Float inputs are differentiated unless this is false. */
  wrt?: boolean;
}

export interface GradCase {
  name: string;
  inputs: CaseInput[];
  build: (b: GraphBuilder, x: Record<string, string>) => string;
  h?: number;
  atol?: number;
  rtol?: number;
}

export interface GradReport {
  maxError: number;
  checked: number;
  /** Gradient values from the graph, by input name. */
  analytic: Record<string, Float32Array>;
  /** Backward nodes appended to the graph. */
  backwardNodes: number;
}

function feedOf(input: CaseInput, data: number[]): ort.Tensor {
  const dims = input.dims ?? (input.shape as number[]);
  switch (input.dtype ?? 'float32') {
    case 'int64': return new ort.Tensor('int64', BigInt64Array.from(data.map(BigInt)), dims);
    case 'bool': return new ort.Tensor('bool', Uint8Array.from(data), dims);
    default: return new ort.Tensor('float32', Float32Array.from(data), dims);
  }
}

function buildGraph(c: GradCase, withGrads: boolean, yDims?: number[]) {
  const b = new GraphBuilder(c.name.replace(/\W+/g, '_'));
  const x: Record<string, string> = {};
  for (const i of c.inputs) x[i.name] = b.input(i.name, i.dtype ?? 'float32', i.shape);
  const y = c.build(b, x);
  b.output(b.identityAs(y, 'y'));
  if (!withGrads) return { b, wrt: [] as string[], forwardNodes: 0 };
  const w = b.input('w', 'float32', yDims!);
  const loss = b.op('ReduceSum', [b.mul(y, w)], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;
  b.output(b.identityAs(loss, 'loss'));
  const wrt = c.inputs.filter((i) => (i.dtype ?? 'float32') === 'float32' && i.wrt !== false).map((i) => i.name);
  const forwardNodes = b.graph.nodes.length;
  const grads = appendGradients(b, loss, wrt);
  for (const name of wrt) b.output(b.identityAs(grads.get(name)!, `grad_${name}`));
  return { b, wrt, forwardNodes };
}

/** Runs the finite-difference check of one case; throws with details when a gradient is off. */
export async function gradCheck(c: GradCase, seed = 7): Promise<GradReport> {
  const rand = seededRandom(seed);
  const data = new Map(c.inputs.map((i) => {
    const n = (i.dims ?? (i.shape as number[])).reduce((p, d) => p * d, 1);
    return [i.name, i.data ?? Array.from({ length: n }, () => 2 * rand() - 1)];
  }));
  const feeds = (override?: [string, number[]]) => Object.fromEntries(c.inputs.map((i) => [i.name, feedOf(i, override?.[0] === i.name ? override[1] : data.get(i.name)!)]));

  const probe = await ort.InferenceSession.create(serializeModel(buildGraph(c, false).b.graph));
  const yDims = [...((await probe.run(feeds())).y as ort.Tensor).dims];
  await probe.release();
  const wData = Float32Array.from({ length: yDims.reduce((p, d) => p * d, 1) }, () => 2 * rand() - 1);

  const { b, wrt, forwardNodes } = buildGraph(c, true, yDims);
  const session = await ort.InferenceSession.create(serializeModel(b.graph), { graphOptimizationLevel: 'disabled' });
  const run = async (override?: [string, number[]]) => session.run({ ...feeds(override), w: new ort.Tensor('float32', wData, yDims) });
  const base = await run();
  const h = c.h ?? 1e-2, atol = c.atol ?? 2e-3, rtol = c.rtol ?? 1e-2;
  let maxError = 0, checked = 0;
  const analytic: Record<string, Float32Array> = {};
  for (const name of wrt) {
    const g = (base[`grad_${name}`] as ort.Tensor).data as Float32Array;
    analytic[name] = g;
    const x = data.get(name)!;
    if (g.length !== x.length) throw new Error(`${c.name}: gradient of ${name} has ${g.length} elements, the input ${x.length}`);
    for (let k = 0; k < x.length; k++) {
      const plus = [...x], minus = [...x];
      plus[k]! += h;
      minus[k]! -= h;
      const lp = ((await run([name, plus])).loss as ort.Tensor).data[0] as number;
      const lm = ((await run([name, minus])).loss as ort.Tensor).data[0] as number;
      const fd = (lp - lm) / (2 * h);
      const err = Math.abs(fd - g[k]!);
      if (!(err <= atol + rtol * Math.abs(fd))) {
        throw new Error(`${c.name}: d/d${name}[${k}] analytic ${g[k]} vs finite difference ${fd}`);
      }
      maxError = Math.max(maxError, err);
      checked++;
    }
  }
  await session.release();
  return { maxError, checked, analytic, backwardNodes: b.graph.nodes.length - forwardNodes };
}

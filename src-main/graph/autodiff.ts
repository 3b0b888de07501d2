/**
 * Reverse-mode automatic differentiation over the graph IR (./ir.ts).
 *
 *     const grads = appendGradients(b, loss, ['lora_A_0', 'lora_B_0']);
 *     b.output(b.identityAs(grads.get('lora_A_0')!, 'grad_A_0'));
 *
 * `appendGradients` appends the backward pass to the builder's graph, as plain ONNX nodes,
 * and returns the name of the gradient value of each requested input. How it walks:
 * 1. Forward from the `wrt` values: which values depend on them. Only floating-point outputs
 *    of differentiable ops count, so index arithmetic, masks and shapes drop out at once.
 * 2. Backward from the loss: which values the loss depends on.
 * 3. Nodes on both paths get their gradient rule (from the op table, ./op-table.ts) called,
 *    last node first (the builder appends nodes in topological order). Everything else — the causal mask, the RoPE
 *    tables, frozen weights — is pruned: no backward node is ever written for it.
 * 4. A value used by several nodes gets the sum of their contributions.
 *
 * With `recompute` segments (./recompute.ts), the gradient rules of a segment's nodes read
 * a copy of the segment computed again in the backward pass, not the forward values.
 *
 * The loss must be a scalar (its seed gradient is 1). A `wrt` value the loss does not depend
 * on gets a zero gradient, so callers can always fetch every gradient they asked for.
 *
 * `stopGradient(b, x)` is x with its gradient stopped (torch's `x.detach()`): same value at
 * run time, a constant for step 1 above. ONNX has no such op: it is an Identity node whose
 * node name starts with {@link STOP_GRADIENT}, a plain Identity at run time; the marker lives
 * in the node name so it survives serialisation and shows in graph viewers. Nothing
 * downstream of it depends on the trained values through it, so no gradient flows back
 * across it and the Identity rule is never called for it. The policy loss
 * uses it for `old` := stopgrad(logp), so one run gives the log-probs, the ratio of exactly 1
 * and the gradient A·∇logp without a second forward pass.
 *
 * `halfProduct(b, x, w16)` is x·W in half precision, its gradient scaled on its way through
 * fp16 (see {@link halfProduct}); its two Casts are marked by node-name prefixes, as above.
 */
import type { GraphBuilder } from './ir.js';
import { int, valuesNeededFor, type DType, type Node } from './ir-data.js';
import type { GradContext } from './op-record.js';
import { gradientRule, isNonDifferentiable } from './op-table.js';
import { describeAs, sumToShape, zerosLike } from './gradient-shapes.js';
import { Recomputer, type Segment } from './recompute.js';

/** Node-name prefix of a stop-gradient Identity (see the module comment). */
export const STOP_GRADIENT = 'StopGradient';

/** Whether a node is a stop-gradient marker: its output is a constant for autodiff. */
export const isStopGradient = (node: Node): boolean => node.op === 'Identity' && node.name.startsWith(STOP_GRADIENT);

const FLOAT_TYPES = new Set<DType | undefined>(['float32', 'float16', 'bfloat16']);

/** Values downstream of `wrt` through differentiable ops and floating-point values. */
function dependsOnWrt(nodes: Node[], b: GraphBuilder, wrt: string[]): Set<string> {
  const active = new Set(wrt);
  for (const node of nodes) {
    if (isNonDifferentiable(node.op) || isStopGradient(node) || !node.inputs.some((i) => active.has(i))) continue;
    for (const o of node.outputs) if (FLOAT_TYPES.has(b.dtypeOf(o))) active.add(o);
  }
  return active;
}

/** x with its gradient stopped: the same value, a constant for {@link appendGradients}. */
export function stopGradient(b: GraphBuilder, x: string): string {
  const [y] = b.op('Identity', [x], {}, [b.fresh('stop_gradient')], [{ dtype: b.dtypeOf(x), shape: b.shapeOf(x) }]);
  b.graph.nodes.at(-1)!.name = b.fresh(STOP_GRADIENT);
  return y!;
}

/** Node-name prefixes of a half-precision product's Casts (see {@link halfProduct}). */
const HALF_IN = 'HalfGradIn', HALF_OUT = 'HalfGradOut';

/**
 * What the largest gradient entry of a half-precision product becomes on its way through fp16:
 * far above fp16's smallest normal (6.1e-5) and far below its largest (65,504), with room for
 * the products' sums (fp16 accumulation on WebGPU) not to overflow.
 */
const HALF_GRADIENT_PEAK = 256;

/**
 * x·W for an fp32 x and an fp16 W, in half precision, cast back to fp32 (docs/design.md
 * §Precision). Its gradient is the transposed fp16 product, like any Cast–MatMul–Cast chain's,
 * but scaled: the gradient reaching a projection is small (the loss's, averaged over the reply's
 * tokens), much of it under fp16's normal range, and WebGPU flushes fp16 subnormals to zero
 * (the CPU's fp16 path lost them too): the update came out 60% wrong at hidden 256. So the
 * gradient is multiplied by HALF_GRADIENT_PEAK / max|dy| before it is cast down and the
 * product's gradient divided by the same after it is cast up (mixed precision's loss scaling,
 * per product and per step, so no scale is carried between steps and nothing overflows to skip
 * a step for).
 */
export function halfProduct(b: GraphBuilder, x: string, w16: string): string {
  const id = b.fresh('half');
  const x16 = b.cast(x, 'float16');
  b.graph.nodes.at(-1)!.name = `${HALF_IN}_${id}`;
  const y = b.cast(b.matmul(x16, w16), 'float32');
  b.graph.nodes.at(-1)!.name = `${HALF_OUT}_${id}`;
  return y;
}

/**
 * The gradient rule of a {@link halfProduct}'s Cast, or undefined for any other node. The
 * output Cast's rule (walked first) leaves the scale's inverse in `scales` under the product's
 * id for the input Cast's.
 */
function halfProductRule(node: Node, scales: Map<string, string>): ((c: GradContext) => (string | undefined)[]) | undefined {
  if (node.op !== 'Cast') return undefined;
  if (node.name.startsWith(`${HALF_OUT}_`)) {
    const id = node.name.slice(HALF_OUT.length + 1);
    return ({ b, dy }) => {
      const peak = b.op('ReduceMax', [b.abs(dy[0]!)], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;
      const floor = b.max(peak, b.scalar(1e-30)); // an all-zero gradient stays zero
      scales.set(id, b.div(floor, b.scalar(HALF_GRADIENT_PEAK)));
      return [b.cast(b.mul(dy[0]!, b.div(b.scalar(HALF_GRADIENT_PEAK), floor)), 'float16')];
    };
  }
  if (node.name.startsWith(`${HALF_IN}_`)) {
    const id = node.name.slice(HALF_IN.length + 1);
    return ({ b, dy }) => {
      const inverse = scales.get(id);
      if (!inverse) throw new Error(`autodiff: the half-precision product ${id} was reached at its input before its output`);
      return [b.mul(b.cast(dy[0]!, 'float32'), inverse)];
    };
  }
  return undefined;
}

/** Appends d(loss)/d(v) for each v in `wrt`; returns wrt name → gradient value name. */
export interface GradientOptions {
  /** Segments of the forward nodes to recompute in the backward pass (./recompute.ts). */
  recompute?: Segment[];
}

export function appendGradients(b: GraphBuilder, loss: string, wrt: string[], options: GradientOptions = {}): Map<string, string> {
  const lossShape = b.shapeOf(loss);
  if (lossShape && lossShape.length !== 0) throw new Error(`autodiff: the loss '${loss}' must be a scalar, its shape is [${lossShape}]`);
  for (const w of wrt) if (!b.valueInfo(w)) throw new Error(`autodiff: unknown value '${w}' to differentiate with respect to`);

  const forward = [...b.graph.nodes]; // the nodes appended below are not walked
  const active = dependsOnWrt(forward, b, wrt);
  const needed = valuesNeededFor(forward, [loss]); // values the loss depends on
  const onPath = (v: string) => active.has(v) && needed.has(v);
  const recomputer = new Recomputer(b, forward, options.recompute ?? [], (v) => active.has(v));

  // Gradient contributions per value, summed when the value is first read.
  const contributions = new Map<string, string[]>([[loss, [b.scalar(1)]]]);
  const gradientOf = (v: string): string | undefined => {
    const parts = contributions.get(v);
    if (!parts?.length) return undefined;
    const total = parts.reduce((acc, p) => describeAs(b, b.add(acc, p), v));
    contributions.set(v, [total]);
    return total;
  };

  const trained = new Set(wrt);
  const halfScales = new Map<string, string>(); // halfProductRule's scales, by product
  // What the gradient entering a segment waits for (see ./recompute.ts): for a layer, the
  // trained values' gradients made since the last layer was entered; for a piece (an attention
  // chunk), the gradients the piece walked before it made.
  let trainedSinceBoundary: string[] = [];
  let madeInPiece: string[] = [];
  for (let i = forward.length - 1; i >= 0; i--) {
    const segment = recomputer.endingAt(i);
    if (segment) {
      const waitFor = segment.piece ? madeInPiece : trainedSinceBoundary;
      if (waitFor.length) {
        const zero = recomputer.zeroAfter(waitFor);
        for (const v of forward[i]!.outputs) contributions.get(v)?.push(zero);
      }
      if (segment.piece) madeInPiece = [];
      else trainedSinceBoundary = [];
    }
    walk(i);
  }

  function walk(i: number): void {
    const node = forward[i]!;
    if (!node.outputs.some(onPath)) return;
    const dy = node.outputs.map((o) => (onPath(o) ? gradientOf(o) : undefined));
    if (dy.every((g) => g === undefined)) return; // on the path, but nothing flowed back to it
    const rule = halfProductRule(node, halfScales) ?? gradientRule(node.op);
    if (!rule) throw new Error(`autodiff: no gradient rule for op ${node.op} (node ${node.name}), which lies between the trained values and the loss`);
    const outShape = b.shapeOf(node.outputs[0]!);
    const seen = recomputer.view(i, node, dy.find((g) => g !== undefined)!);
    const ctx: GradContext = {
      b,
      node: seen,
      x: seen.inputs,
      y: seen.outputs,
      dy,
      needs: (k) => !!node.inputs[k] && onPath(node.inputs[k]!),
      reduce: (g, k, gShape) => sumToShape(b, g, gShape ?? outShape, seen.inputs[k]!),
    };
    const dx = rule(ctx);
    const inPiece = recomputer.inPiece(i);
    node.inputs.forEach((input, k) => {
      const g = dx[k];
      if (!g || !ctx.needs(k)) return;
      describeAs(b, g, input);
      const list = contributions.get(input);
      if (list) list.push(g);
      else contributions.set(input, [g]);
      if (trained.has(input)) trainedSinceBoundary.push(g);
      if (inPiece) madeInPiece.push(g);
    });
  }

  return new Map(wrt.map((w) => [w, gradientOf(w) ?? zerosLike(b, w)]));
}

// Every gradient rule of the op table against finite differences (./gradcheck.ts),
// broadcasting and symbolic dims included, plus the graph walk: accumulation, pruning and its errors.
import { describe, expect, it } from 'vitest';
import { GraphBuilder, int, type Node } from '../../src-main/graph/ir.js';
import { appendGradients } from '../../src-main/graph/autodiff.js';
import { NOT_DIFFERENTIABLE } from '../../src-main/graph/op-record.js';
import { OP_TABLE } from '../../src-main/graph/op-table.js';
import { gradCheck, type GradCase } from './gradcheck.js';
import { quantizeBlockwise } from '../../src-main/model/quantize.js';

const positive = (n: number, lo = 0.5, hi = 2) => Array.from({ length: n }, (_, i) => lo + ((i * 0.37) % 1) * (hi - lo));
/** Values with gaps of ≥ 0.1 between them and away from 0, so kinks (ties, Relu, Abs, Clip) stay out of reach of h. */
const spread = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => ((i * 7 + offset) % n) * (1.6 / n) - 0.77);

/** x · Wᵀ through MatMulNBits, W [n, k] a spread of values quantised in blocks of 32 (../../src-main/model/quantize.ts). */
function nBits(b: GraphBuilder, x: string, n: number, k: number, bits: 4 | 8): string {
  const scheme = { bits, blockSize: 32, accuracyLevel: 0 } as const;
  const q = quantizeBlockwise(Float32Array.from(spread(n * k)), n, k, scheme);
  const init = (part: 'codes' | 'scales' | 'zeroPoints') => b.initializer(`w.${part}`, q[part]);
  return b.contribOp('MatMulNBits', [x, init('codes'), init('scales'), init('zeroPoints')], {
    K: int(k), N: int(n), bits: int(bits), block_size: int(scheme.blockSize), accuracy_level: int(0),
  }, { dtype: 'float32', shape: [...b.shapeOf(x)!.slice(0, -1), n] });
}

const cases: GradCase[] = [
  // ---- element-wise, with broadcasting ----
  { name: 'Add [2,3]+[3]', inputs: [{ name: 'a', shape: [2, 3] }, { name: 'c', shape: [3] }], build: (b, x) => b.add(x.a!, x.c!) },
  { name: 'Add symbolic [B,3]+[1,3]', inputs: [{ name: 'a', shape: ['B', 3], dims: [4, 3] }, { name: 'c', shape: [1, 3] }], build: (b, x) => b.add(x.a!, x.c!) },
  { name: 'Add run-time broadcast [N,3]+[M,3]', inputs: [{ name: 'a', shape: ['N', 3], dims: [1, 3] }, { name: 'c', shape: ['M', 3], dims: [4, 3] }], build: (b, x) => b.add(x.a!, x.c!) },
  { name: 'Sub [2,1,3]-[4,1]', inputs: [{ name: 'a', shape: [2, 1, 3] }, { name: 'c', shape: [4, 1] }], build: (b, x) => b.sub(x.a!, x.c!) },
  { name: 'Mul [2,3]*[2,1]', inputs: [{ name: 'a', shape: [2, 3] }, { name: 'c', shape: [2, 1] }], build: (b, x) => b.mul(x.a!, x.c!) },
  { name: 'Div [2,3]/[3]', inputs: [{ name: 'a', shape: [2, 3] }, { name: 'c', shape: [3], data: [0.8, -1.5, 1.2] }], build: (b, x) => b.div(x.a!, x.c!) },
  { name: 'Pow [2,3]^[3]', inputs: [{ name: 'a', shape: [2, 3], data: positive(6) }, { name: 'c', shape: [3], data: [0.5, 2, -1.5] }], build: (b, x) => b.pow(x.a!, x.c!) },
  { name: 'Neg', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.neg(x.a!) },
  { name: 'Sqrt', inputs: [{ name: 'a', shape: [2, 3], data: positive(6) }], build: (b, x) => b.sqrt(x.a!) },
  { name: 'Reciprocal', inputs: [{ name: 'a', shape: [2, 3], data: positive(6) }], build: (b, x) => b.reciprocal(x.a!) },
  { name: 'Exp', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.exp(x.a!) },
  { name: 'Log', inputs: [{ name: 'a', shape: [2, 3], data: positive(6) }], build: (b, x) => b.log(x.a!) },
  { name: 'Sigmoid', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.sigmoid(x.a!) },
  { name: 'Tanh', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.tanh(x.a!) },
  { name: 'Sin', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.sin(x.a!) },
  { name: 'Cos', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.cos(x.a!) },
  { name: 'Relu', inputs: [{ name: 'a', shape: [2, 4], data: spread(8) }], build: (b, x) => b.relu(x.a!) },
  { name: 'Abs', inputs: [{ name: 'a', shape: [2, 4], data: spread(8) }], build: (b, x) => b.abs(x.a!) },
  { name: 'Identity', inputs: [{ name: 'a', shape: [3] }], build: (b, x) => b.identity(x.a!) },
  { name: 'Cast float32→float32', inputs: [{ name: 'a', shape: [3] }], build: (b, x) => b.cast(x.a!, 'float32') },
  { name: 'Where [2,3] with [3] and [2,1]', inputs: [
    { name: 'cond', dtype: 'bool', shape: [2, 3], data: [1, 0, 1, 0, 0, 1] },
    { name: 'a', shape: [3] }, { name: 'c', shape: [2, 1] },
  ], build: (b, x) => b.where(x.cond!, x.a!, x.c!) },
  { name: 'Min [2,3] with [3]', inputs: [{ name: 'a', shape: [2, 3], data: spread(6) }, { name: 'c', shape: [3], data: spread(3, 1).map((v) => v + 0.05) }], build: (b, x) => b.min(x.a!, x.c!) },
  { name: 'Max [2,3] with [2,1]', inputs: [{ name: 'a', shape: [2, 3], data: spread(6) }, { name: 'c', shape: [2, 1], data: [0.03, -0.22] }], build: (b, x) => b.max(x.a!, x.c!) },
  { name: 'Clip inside and outside [-0.4, 0.5]', inputs: [{ name: 'a', shape: [2, 4], data: spread(8) }], build: (b, x) => b.clip(x.a!, b.scalar(-0.4), b.scalar(0.5)) },
  { name: 'Clip with only a max', inputs: [{ name: 'a', shape: [2, 4], data: spread(8) }], build: (b, x) => b.clip(x.a!, undefined, b.scalar(0.1)) },

  // ---- normalisation and reductions ----
  { name: 'Softmax axis -1', inputs: [{ name: 'a', shape: [2, 4] }], build: (b, x) => b.softmax(x.a!, -1) },
  { name: 'Softmax axis 1 of 3', inputs: [{ name: 'a', shape: [2, 3, 2] }], build: (b, x) => b.softmax(x.a!, 1) },
  { name: 'LogSoftmax', inputs: [{ name: 'a', shape: [2, 5] }], build: (b, x) => b.logSoftmax(x.a!, -1) },
  { name: 'ReduceSum keepdims', inputs: [{ name: 'a', shape: [2, 3, 2] }], build: (b, x) => b.reduceSum(x.a!, [1], true) },
  { name: 'ReduceSum no keepdims, two axes', inputs: [{ name: 'a', shape: [2, 3, 2] }], build: (b, x) => b.reduceSum(x.a!, [0, 2], false) },
  { name: 'ReduceMean keepdims', inputs: [{ name: 'a', shape: [2, 3, 4] }], build: (b, x) => b.reduceMean(x.a!, [-1], true) },
  { name: 'ReduceMean no keepdims', inputs: [{ name: 'a', shape: [2, 3, 4] }], build: (b, x) => b.reduceMean(x.a!, [0, -1], false) },
  { name: 'ReduceMean symbolic dims', inputs: [{ name: 'a', shape: ['B', 'T', 4], dims: [2, 3, 4] }], build: (b, x) => b.reduceMean(x.a!, [1], false) },
  { name: 'ReduceSum of everything', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.op('ReduceSum', [x.a!], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]! },

  // ---- linear algebra ----
  { name: 'MatMul [2,3]x[3,4]', inputs: [{ name: 'a', shape: [2, 3] }, { name: 'c', shape: [3, 4] }], build: (b, x) => b.matmul(x.a!, x.c!) },
  { name: 'MatMul batched x shared weight', inputs: [{ name: 'a', shape: [2, 2, 3] }, { name: 'c', shape: [3, 4] }], build: (b, x) => b.matmul(x.a!, x.c!) },
  { name: 'MatMul broadcast batch [2,1,3,4]x[3,4,2]', inputs: [{ name: 'a', shape: [2, 1, 3, 4] }, { name: 'c', shape: [3, 4, 2] }], build: (b, x) => b.matmul(x.a!, x.c!) },
  { name: 'MatMul symbolic [B,T,4]x[4,2]', inputs: [{ name: 'a', shape: ['B', 'T', 4], dims: [2, 3, 4] }, { name: 'c', shape: [4, 2] }], build: (b, x) => b.matmul(x.a!, x.c!) },
  { name: 'MatMul GQA [B,kv,rep,T,d]x[B,kv,1,d,S]', inputs: [{ name: 'a', shape: ['B', 2, 2, 'T', 3], dims: [1, 2, 2, 2, 3] }, { name: 'c', shape: ['B', 2, 1, 3, 'S'], dims: [1, 2, 1, 3, 2] }], build: (b, x) => b.matmul(x.a!, x.c!) },
  // MatMulNBits (QLoRA's frozen linear): dA = dY·dequant(B), two int4 blocks along K = 40 (the last padded), and int8.
  { name: 'MatMulNBits int4 [B,T,40]·W[6,40]ᵀ', inputs: [{ name: 'a', shape: ['B', 'T', 40], dims: [2, 3, 40] }], build: (b, x) => nBits(b, x.a!, 6, 40, 4) },
  { name: 'MatMulNBits int8 [3,20]·W[5,20]ᵀ', inputs: [{ name: 'a', shape: [3, 20] }], build: (b, x) => nBits(b, x.a!, 5, 20, 8) },

  // ---- shapes ----
  { name: 'Transpose', inputs: [{ name: 'a', shape: [2, 3, 4] }], build: (b, x) => b.transpose(x.a!, [2, 0, 1]) },
  { name: 'Reshape with 0 and -1', inputs: [{ name: 'a', shape: ['B', 6], dims: [2, 6] }], build: (b, x) => b.reshape(x.a!, [0, 3, -1]) },
  { name: 'Unsqueeze', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.unsqueeze(x.a!, [0, -1]) },
  { name: 'Squeeze', inputs: [{ name: 'a', shape: [2, 1, 3] }], build: (b, x) => b.squeeze(x.a!, [1]) },
  { name: 'Flatten', inputs: [{ name: 'a', shape: [2, 3, 2] }], build: (b, x) => b.flatten(x.a!, 1) },
  { name: 'Expand [3,1]→[2,3,4]', inputs: [{ name: 'a', shape: [3, 1] }], build: (b, x) => b.expand(x.a!, b.int64s([2, 3, 4]), [2, 3, 4]) },
  { name: 'Slice static', inputs: [{ name: 'a', shape: [3, 5] }], build: (b, x) => b.slice(x.a!, [1, 1], [3, 4], [0, 1]) },
  { name: 'Slice negative start, past-the-end end', inputs: [{ name: 'a', shape: [3, 5] }], build: (b, x) => b.slice(x.a!, [-3], [100], [1]) },
  { name: 'Slice symbolic dims', inputs: [{ name: 'a', shape: ['B', 'T'], dims: [2, 5] }], build: (b, x) => b.slice(x.a!, [1, -2], [2, 1000], [0, 1]) },
  { name: 'Split, one piece unused', inputs: [{ name: 'a', shape: [2, 6] }], build: (b, x) => {
    const [p, , r] = b.split(x.a!, -1, [2, 1, 3]) as [string, string, string];
    return b.concat([r, p], -1);
  } },
  { name: 'Concat static', inputs: [{ name: 'a', shape: [2, 2] }, { name: 'c', shape: [2, 3] }], build: (b, x) => b.concat([x.a!, x.c!, x.a!], 1) },
  { name: 'Concat symbolic', inputs: [{ name: 'a', shape: ['P', 2], dims: [1, 2] }, { name: 'c', shape: ['T', 2], dims: [3, 2] }], build: (b, x) => b.concat([x.a!, x.c!], 0) },

  // ---- indexing ----
  { name: 'Gather axis 0 (embedding), repeated ids', inputs: [
    { name: 'a', shape: [5, 3] }, { name: 'ids', dtype: 'int64', shape: [2, 3], data: [0, 4, 4, 1, 0, 0] },
  ], build: (b, x) => b.gather(x.a!, x.ids!, 0) },
  { name: 'Gather axis 1, negative index', inputs: [
    { name: 'a', shape: [2, 4, 3] }, { name: 'ids', dtype: 'int64', shape: [3], data: [3, -1, 1] },
  ], build: (b, x) => b.gather(x.a!, x.ids!, 1) },
  { name: 'Gather scalar index', inputs: [
    { name: 'a', shape: [4, 3] }, { name: 'ids', dtype: 'int64', shape: [], data: [2] },
  ], build: (b, x) => b.gather(x.a!, x.ids!, 0) },
  { name: 'GatherElements last axis, repeated', inputs: [
    { name: 'a', shape: [2, 3, 5] }, { name: 'ids', dtype: 'int64', shape: [2, 3, 2], data: [0, 4, 4, 4, 1, 2, 3, 3, 0, 1, 2, 0] },
  ], build: (b, x) => b.gatherElements(x.a!, x.ids!, -1) },

  // ---- the graph walk ----
  { name: 'a value used three times (accumulation)', inputs: [{ name: 'a', shape: [2, 3] }], build: (b, x) => b.add(b.mul(x.a!, x.a!), b.exp(x.a!)) },
  { name: 'RMSNorm as the decoder writes it', inputs: [{ name: 'a', shape: [2, 4] }, { name: 'g', shape: [4] }], build: (b, x) => {
    const inv = b.reciprocal(b.sqrt(b.add(b.reduceMean(b.mul(x.a!, x.a!), [-1], true), b.scalar(1e-6))));
    return b.mul(b.mul(x.a!, inv), x.g!);
  } },
];

describe('gradient rules vs finite differences', () => {
  for (const c of cases) {
    it(c.name, async () => {
      const report = await gradCheck(c);
      expect(report.checked).toBeGreaterThan(0);
      expect(report.maxError).toBeLessThan(5e-3);
    });
  }

  it('every op in the table has a gradient rule with a case here, or carries no gradient', () => {
    const tested = new Set<string>();
    for (const c of cases) {
      const b = new GraphBuilder();
      const x: Record<string, string> = {};
      for (const i of c.inputs) x[i.name] = b.input(i.name, i.dtype ?? 'float32', i.shape);
      c.build(b, x);
      b.graph.nodes.forEach((n: Node) => tested.add(n.op));
    }
    const records = [...OP_TABLE.values()];
    expect(records.filter((r) => typeof r.gradient !== 'function' && r.gradient !== NOT_DIFFERENTIABLE).map((r) => r.name)).toEqual([]);
    expect(records.filter((r) => typeof r.gradient === 'function' && !tested.has(r.name)).map((r) => r.name)).toEqual([]);
  });

  it('a wrong rule fails the check', async () => {
    const sigmoid = OP_TABLE.get('Sigmoid')!;
    const saved = sigmoid.gradient;
    sigmoid.gradient = ({ b, y, dy }) => [b.mul(dy[0]!, y[0]!)]; // missing the (1 − y) factor
    try {
      await expect(gradCheck({ name: 'wrong sigmoid', inputs: [{ name: 'a', shape: [3] }], build: (b, x) => b.sigmoid(x.a!) })).rejects.toThrow(/finite difference/);
    } finally {
      sigmoid.gradient = saved;
    }
  });
});

describe('the graph walk', () => {
  it('writes backward nodes only on paths from the trained values to the loss', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 3]);
    const w = b.input('w', 'float32', [3, 3]);
    const frozen = b.input('frozen', 'float32', [3, 3]);
    const mask = b.where(b.greater(b.reduceSum(b.exp(frozen), [0], true), b.scalar(0)), b.scalar(1), b.scalar(0)); // frozen-only branch
    const h = b.mul(b.matmul(x, w), mask);
    const loss = b.op('ReduceSum', [b.matmul(h, frozen)], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;
    const before = b.graph.nodes.length;
    const grads = appendGradients(b, loss, [w]);
    const backward = b.graph.nodes.slice(before);
    expect(grads.get(w)).toBeDefined();
    // No rule ran for Exp, Where or the frozen-only ReduceSum: the one Expand is the loss's ReduceSum.
    expect(backward.filter((n) => n.op === 'Exp')).toEqual([]);
    expect(backward.filter((n) => n.op === 'Expand')).toHaveLength(1);
    // ReduceSum → MatMul(h, frozen) → Mul(·, mask) → MatMul(x, w): dh = dy·frozenᵀ as one Gemm
    // (transB, no transposed copy of the 2-D weight), dw = xᵀ·dh as one MatMul.
    expect(backward.filter((n) => n.op === 'Gemm')).toHaveLength(1);
    expect(backward.filter((n) => n.op === 'MatMul')).toHaveLength(1);
  });

  it('gives zeros for a value the loss does not depend on', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2]);
    const unused = b.input('unused', 'float32', [4]);
    const loss = b.op('ReduceSum', [b.exp(x)], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;
    const g = appendGradients(b, loss, [unused]).get(unused)!;
    expect(b.graph.nodes.find((n) => n.outputs.includes(g))?.op).toBe('ConstantOfShape');
  });

  it('names the node when an op on the path has no rule', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2]);
    const y = b.op('Erf', [x], {}, 1, [{ dtype: 'float32', shape: [2] }])[0]!;
    const loss = b.op('ReduceSum', [y], { keepdims: int(0) }, 1, [{ dtype: 'float32', shape: [] }])[0]!;
    expect(() => appendGradients(b, loss, [x])).toThrow(/no gradient rule for op Erf \(node n_Erf_\d+\)/);
  });

  it('rejects a loss that is not a scalar', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2]);
    expect(() => appendGradients(b, b.exp(x), [x])).toThrow(/must be a scalar/);
  });
});

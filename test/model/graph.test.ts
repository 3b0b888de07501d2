// The graph IR and its ONNX serialisation, checked by running the result in ONNX Runtime.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { GraphBuilder, f32Tensor, broadcastShapes } from '../../src-main/graph/ir.js';
import { liveNodes, saveModel, serializeModel } from '../../src-main/graph/onnx.js';

function smallGraph() {
  const b = new GraphBuilder('t');
  const x = b.input('x', 'float32', ['B', 'T', 4]);
  const past = b.input('past', 'float32', ['B', 'P', 4]);
  const w = b.initializer('w', f32Tensor([4, 4], Array.from({ length: 16 }, (_, i) => (i - 8) / 10)));
  const y = b.softmax(b.matmul(x, w), -1);
  const all = b.concat([past, y], 1);
  const total = b.reduceSum(all, [1], false);
  b.output(all);
  b.output(total);
  return { b, y, all, total };
}

/** The same computation in plain JS, for x of shape [1, T, 4] and an empty past. */
function expectedTotal(x: number[][]): number[] {
  const out = [0, 0, 0, 0];
  for (const row of x) {
    const z = [0, 1, 2, 3].map((j) => row.reduce((s, v, i) => s + v * ((i * 4 + j - 8) / 10), 0));
    const m = Math.max(...z);
    const e = z.map((v) => Math.exp(v - m));
    const sum = e.reduce((a, b) => a + b, 0);
    e.forEach((v, j) => (out[j]! += v / sum));
  }
  return out;
}

describe('graph IR', () => {
  it('infers shapes, including symbolic dims', () => {
    const { b, y, all, total } = smallGraph();
    expect(b.shapeOf(y)).toEqual(['B', 'T', 4]);
    expect(b.shapeOf(all)![0]).toBe('B');
    expect(b.shapeOf(total)).toEqual(['B', 4]);
    expect(broadcastShapes(['B', 1, 'T'], [4, 1])).toEqual(['B', 4, 'T']);
    expect(() => broadcastShapes([3], [4])).toThrow(/broadcast/);
  });

  it('rejects unknown inputs', () => {
    const b = new GraphBuilder();
    expect(() => b.add('nope', 'nope')).toThrow(/unknown input value 'nope'/);
  });

  const x = [[0.5, -1, 2, 0], [1, 1, -0.5, 0.25]];
  const feeds = () => ({
    x: new ort.Tensor('float32', Float32Array.from(x.flat()), [1, 2, 4]),
    past: new ort.Tensor('float32', new Float32Array(0), [1, 0, 4]),
  });

  it('serialises to ONNX that runs and computes the right values', async () => {
    const { b, all, total } = smallGraph();
    const session = await ort.InferenceSession.create(serializeModel(b.graph));
    const r = await session.run(feeds());
    expect(r[all]!.dims).toEqual([1, 2, 4]);
    const got = Array.from(r[total]!.data as Float32Array);
    expectedTotal(x).forEach((v, j) => expect(got[j]).toBeCloseTo(v, 5));
  });

  it('leaves out nodes whose results reach no output (ONNX Runtime would run them last, keeping their inputs alive)', async () => {
    const { b, all, total } = smallGraph();
    const before = b.graph.nodes.length;
    const unused = b.reduceSum(b.exp(all), [2], false); // read by nothing
    const chain = b.graph.nodes.slice(before).map((n) => n.name);
    expect(chain.length).toBeGreaterThanOrEqual(2);
    const kept = liveNodes(b.graph).map((n) => n.name);
    expect(kept.length).toBe(before);
    for (const name of chain) expect(kept).not.toContain(name);
    const session = await ort.InferenceSession.create(serializeModel(b.graph));
    expect(session.outputNames).not.toContain(unused);
    const r = await session.run(feeds());
    expectedTotal(x).forEach((v, j) => expect(Array.from(r[total]!.data as Float32Array)[j]).toBeCloseTo(v, 5));
  });

  it('writes external data that ONNX Runtime loads by path', async () => {
    const { b, total } = smallGraph();
    // Make one initializer large enough to go external.
    b.initializer('big', f32Tensor([1024], new Float32Array(1024).fill(1)));
    b.output(b.reduceSum('big', [0], false));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-graph-'));
    try {
      const { onnxPath, dataPath } = saveModel(b.graph, path.join(dir, 'm.onnx'));
      expect(fs.statSync(dataPath).size).toBeGreaterThanOrEqual(4096);
      const session = await ort.InferenceSession.create(onnxPath);
      const r = await session.run(feeds());
      const got = Array.from(r[total]!.data as Float32Array);
      expectedTotal(x).forEach((v, j) => expect(got[j]).toBeCloseTo(v, 5));
      expect(Array.from(r[b.graph.outputs[2]!.name]!.data as Float32Array)).toEqual([1024]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

// The op table and the shape rules of the records: one record per op, and what the builder
// infers for the ops it writes (the gradient rules are checked in ./autodiff.test.ts).
import { describe, expect, it } from 'vitest';
import { GraphBuilder } from '../../src-main/graph/ir.js';
import { OP_TABLE, hasGradientRule, isNonDifferentiable } from '../../src-main/graph/op-table.js';

describe('the op table', () => {
  it('holds each op once, under its ONNX name, and every op the builder writes has a shape rule', () => {
    for (const [name, record] of OP_TABLE) {
      expect(record.name).toBe(name);
      if (record.build) expect(record.inferShape, name).toBeDefined();
    }
    expect(hasGradientRule('MatMul')).toBe(true);
    expect(isNonDifferentiable('Equal')).toBe(true);
    expect(hasGradientRule('Equal')).toBe(false);
    expect(OP_TABLE.has('Erf')).toBe(false);
  });
});

describe('shape rules', () => {
  it('infers element-wise, comparison and reduction outputs', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', ['B', 3]);
    const c = b.input('c', 'float32', [3]);
    expect(b.valueInfo(b.clip(b.relu(b.add(x, c)), undefined, b.scalar(1)))).toMatchObject({ dtype: 'float32', shape: ['B', 3] });
    expect(b.valueInfo(b.less(x, c))).toMatchObject({ dtype: 'bool', shape: ['B', 3] });
    expect(b.valueInfo(b.cast(x, 'int64'))).toMatchObject({ dtype: 'int64', shape: ['B', 3] });
    expect(b.shapeOf(b.reduceMean(x, [-1], false))).toEqual(['B']);
    expect(b.shapeOf(b.reduceSum(x, [0], true))).toEqual([1, 3]);
  });

  it('infers shape ops, naming a fresh dim where the size is symbolic', () => {
    const b = new GraphBuilder();
    const x = b.input('x', 'float32', [2, 'T', 4]);
    expect(b.shapeOf(b.flatten(b.input('s', 'float32', [2, 3, 4]), 1))).toEqual([2, 12]);
    const [rows, cols] = b.shapeOf(b.flatten(x, 2))!;
    expect(rows).toMatch(/^dim_\d+$/);
    expect(cols).toBe(4);
    expect(b.shapeOf(b.reshape(x, [0, -1]))![1]).toMatch(/^dim_\d+$/);
    expect(b.shapeOf(b.transpose(x, [2, 0, 1]))).toEqual([4, 2, 'T']);
    expect(b.shapeOf(b.unsqueeze(x, [0, -1]))).toEqual([1, 2, 'T', 4, 1]);
    expect(b.shapeOf(b.slice(x, [1], [100], [2]))).toEqual([2, 'T', 3]);
    expect(b.split(x, -1, [1, 3]).map((p) => b.shapeOf(p))).toEqual([[2, 'T', 1], [2, 'T', 3]]);
    expect(b.valueInfo(b.shape(x))).toMatchObject({ dtype: 'int64', shape: [3] });
    expect(b.shapeOf(b.reshapeTo(x, b.shape(x), [2, 'T', 4]))).toEqual([2, 'T', 4]);
  });
});

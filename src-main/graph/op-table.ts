/**
 * The op table: every op record of ./ops/ by its ONNX name, in one place (tinygrad keeps its
 * gradient rules in one table too). Every record a family module exports joins the table, so
 * adding an op means adding its record to the family file; two records of one name are an
 * error at load time. Reverse mode (./autodiff.ts) looks ops up here.
 */
import { NOT_DIFFERENTIABLE, isOpRecord, type GradRule, type OpRecord } from './op-record.js';
import * as activations from './ops/activations.js';
import * as arithmetic from './ops/arithmetic.js';
import * as indexing from './ops/indexing.js';
import * as logic from './ops/logic.js';
import * as matmul from './ops/matmul.js';
import * as quantized from './ops/quantized.js';
import * as reductions from './ops/reductions.js';
import * as shape from './ops/shape.js';

const FAMILIES = { activations, arithmetic, indexing, logic, matmul, quantized, reductions, shape };

function collect(): ReadonlyMap<string, OpRecord> {
  const table = new Map<string, OpRecord>();
  for (const [family, exports] of Object.entries(FAMILIES)) {
    for (const record of Object.values(exports).flat().filter(isOpRecord)) {
      if (table.has(record.name)) throw new Error(`op table: ${record.name} is defined twice (again in ops/${family}.ts)`);
      table.set(record.name, record);
    }
  }
  return table;
}

export const OP_TABLE: ReadonlyMap<string, OpRecord> = collect();

/** The gradient rule of an op type, or undefined when it has none (or carries no gradient). */
export function gradientRule(op: string): GradRule | undefined {
  const gradient = OP_TABLE.get(op)?.gradient;
  return typeof gradient === 'function' ? gradient : undefined;
}

export const hasGradientRule = (op: string): boolean => gradientRule(op) !== undefined;

/** Whether an op's outputs never carry a gradient, whatever their dtype. */
export const isNonDifferentiable = (op: string): boolean => OP_TABLE.get(op)?.gradient === NOT_DIFFERENTIABLE;

/**
 * Activation recomputation for reverse mode (./autodiff.ts), per segment of forward nodes
 * (a decoder layer). Without it, every value a gradient rule reads (a layer's attention
 * probabilities, its MLP activations …) stays alive from the forward pass to the backward
 * pass. With it, the gradient rules of a segment's nodes read a copy of the segment, computed
 * again from the segment's inputs when its backward pass starts: the forward originals are
 * freed as soon as the forward pass is done with them, and only one segment's activations
 * are alive at a time in the backward pass (docs/design.md §Memory).
 *
 * When the copy runs. ONNX has no control edges, and a copy whose inputs are all ready after
 * the forward pass could be scheduled right then, keeping everything alive again. So every
 * input of the copy that depends on the trained values (the residual stream entering the
 * layer) is gated: x + 0, where the 0 is computed from a gradient of the segment's backward
 * pass (Size(dy) − Size(dy), an exact 0). The copy then cannot start before that gradient
 * exists. Adding an exact 0 leaves every value as it was, so gradients are unchanged.
 * Inputs that do not depend on the trained values (weights, the RoPE tables, the attention
 * mask) are read as they are.
 *
 * The same kind of gate keeps the parameter gradients in step. A trained weight's gradient
 * (LoRA's xᵀ·dy) feeds nothing but a graph output, so ONNX Runtime's order put every one of
 * them at the end of the run, and kept each layer's inputs and output gradients alive until
 * then (docs/design.md §Memory). So the gradient entering a segment's backward pass carries
 * an exact 0 computed from the parameter gradients made above it (./autodiff.ts).
 *
 * Segments may nest: an attention chunk inside its layer (docs/design.md §Memory). A nested
 * segment is recomputed from its enclosing segment's copy, again when its own backward pass
 * starts. Pieces of one computation (the chunks) are kept in step by the same kind of gate: the
 * gradient entering a piece's backward pass carries an exact 0 computed from the gradients the
 * piece after it made (./autodiff.ts), so one chunk's attention probabilities are alive at a time.
 */
import type { GraphBuilder } from './ir.js';
import type { Node } from './ir-data.js';
import { deviceZeroAfter } from './ops/shape.js';

/** A run of forward nodes, [start, end) in graph.nodes. */
export interface Segment {
  start: number;
  end: number;
  /**
   * One of several pieces of one computation (an attention chunk): the backward passes of
   * pieces are kept one after another (see above); a piece may lie inside another segment.
   */
  piece?: boolean;
}

const bySize = (a: Segment, b: Segment) => a.end - a.start - (b.end - b.start);

/** Original value → its recomputed copy, per segment, made on first use. */
export class Recomputer {
  private readonly copies = new Map<Segment, Map<string, string>>();

  constructor(
    private readonly b: GraphBuilder,
    private readonly forward: Node[],
    private readonly segments: Segment[],
    /** Whether a value depends on the trained values. */
    private readonly active: (v: string) => boolean,
  ) {}

  /**
   * The node as its gradient rule should see it: inputs and outputs renamed to the
   * recomputed copies when the node lies in a segment. `dy` is a gradient that exists now.
   */
  view(index: number, node: Node, dy: string): Node {
    const segment = this.innermostAt(index);
    if (!segment) return node;
    const copy = this.copyOf(segment, dy);
    const rename = (v: string) => copy.get(v) ?? v;
    return { ...node, inputs: node.inputs.map(rename), outputs: node.outputs.map(rename) };
  }

  /** The segment whose last forward node is `index`, if one is (the innermost, if nested). */
  endingAt(index: number): Segment | undefined {
    return this.segments.filter((s) => s.end - 1 === index).sort(bySize)[0];
  }

  /** Whether forward node `index` lies in a piece (see {@link Segment.piece}). */
  inPiece(index: number): boolean {
    return !!this.innermostAt(index)?.piece;
  }

  private innermostAt(index: number): Segment | undefined {
    return this.segments.filter((s) => index >= s.start && index < s.end).sort(bySize)[0];
  }

  private enclosing(segment: Segment): Segment | undefined {
    return this.segments.filter((s) => s !== segment && s.start <= segment.start && segment.end <= s.end).sort(bySize)[0];
  }

  private copyOf(segment: Segment, dy: string): Map<string, string> {
    let copy = this.copies.get(segment);
    if (!copy) {
      copy = this.recompute(segment, dy);
      this.copies.set(segment, copy);
    }
    return copy;
  }

  /** An exact 0 (float scalar) that ONNX Runtime can only compute once every value of `after` exists (./ops/shape.ts deviceZeroAfter). */
  zeroAfter(after: string[]): string {
    return deviceZeroAfter(this.b, after);
  }

  private recompute(segment: Segment, dy: string): Map<string, string> {
    const { b } = this;
    const zero = this.zeroAfter([dy]);
    const copy = new Map<string, string>();
    const produced = new Set(this.forward.slice(segment.start, segment.end).flatMap((n) => n.outputs));
    // A nested segment starts from its enclosing segment's copy, not from the forward originals.
    const outer = this.enclosing(segment);
    const outerCopy = outer ? this.copyOf(outer, dy) : undefined;
    const input = (v: string): string => {
      if (!v || copy.has(v) || produced.has(v)) return copy.get(v) ?? v;
      const source = outerCopy?.get(v) ?? v;
      if (!this.active(v)) return source;
      const gated = b.add(source, zero);
      copy.set(v, gated);
      return gated;
    };
    for (const node of this.forward.slice(segment.start, segment.end)) {
      const inputs = node.inputs.map(input);
      const outputs = node.outputs.map((o) => {
        const name = b.fresh(`${o}_re`);
        b.graph.values.set(name, { ...b.graph.values.get(o), name });
        copy.set(o, name);
        return name;
      });
      b.graph.nodes.push({ ...node, name: b.fresh(`${node.name}_re`), inputs, outputs });
    }
    return copy;
  }
}

/**
 * GGUF's byte encoding for ./gguf-writer.ts: a growing little-endian buffer, and metadata values
 * (key, type tag, value; arrays as element type, count, elements).
 */
/** GGUF metadata value types. */
export const GgufValue = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const;

export type Meta =
  | { kind: 'u32' | 'i32' | 'f32'; value: number }
  | { kind: 'bool'; value: boolean }
  | { kind: 'string'; value: string }
  | { kind: 'strings'; value: string[] }
  | { kind: 'i32s'; value: Int32Array };

/** A little-endian byte writer that grows as needed. */
export class Bytes {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u32(v: number): void {
    this.room(4);
    this.length = this.buf.writeUInt32LE(v, this.length);
  }
  i32(v: number): void {
    this.room(4);
    this.length = this.buf.writeInt32LE(v, this.length);
  }
  u64(v: number): void {
    this.room(8);
    this.length = this.buf.writeBigUInt64LE(BigInt(v), this.length);
  }
  f32(v: number): void {
    this.room(4);
    this.length = this.buf.writeFloatLE(v, this.length);
  }
  u8(v: number): void {
    this.room(1);
    this.length = this.buf.writeUInt8(v, this.length);
  }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.room(b.length);
    this.length += b.copy(this.buf, this.length);
  }
  pad(alignment: number): void {
    const n = (alignment - (this.length % alignment)) % alignment;
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  done(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

export function writeMeta(out: Bytes, key: string, m: Meta): void {
  out.string(key);
  switch (m.kind) {
    case 'u32': out.u32(GgufValue.u32); out.u32(m.value); break;
    case 'i32': out.u32(GgufValue.i32); out.i32(m.value); break;
    case 'f32': out.u32(GgufValue.f32); out.f32(m.value); break;
    case 'bool': out.u32(GgufValue.bool); out.u8(m.value ? 1 : 0); break;
    case 'string': out.u32(GgufValue.string); out.string(m.value); break;
    case 'strings':
      out.u32(GgufValue.array); out.u32(GgufValue.string); out.u64(m.value.length);
      for (const s of m.value) out.string(s);
      break;
    case 'i32s':
      out.u32(GgufValue.array); out.u32(GgufValue.i32); out.u64(m.value.length);
      for (const v of m.value) out.i32(v);
      break;
  }
}

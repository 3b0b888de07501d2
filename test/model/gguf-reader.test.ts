// The GGUF reader: every metadata type, tensor infos, alignment, split files, and one clear
// UserError line for each way a file can be short or lie about its sizes.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openGguf, readGgufHeader, readGgufTensorBytes } from '../../src-main/model/gguf/reader.js';
import { UserError } from '../../src-shared/types.js';
import { f32Bytes, ggufBytes, str, u32, writeGguf, type MetaValue } from './gguf-writer.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function file(name: string, bytes: Uint8Array): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, bytes);
  return p;
}

/** The error `fn` throws: a UserError of one line. */
function userError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    const message = (err as Error).message;
    expect(message).not.toContain('\n');
    return message;
  }
  throw new Error('expected a UserError');
}

const everyType: Record<string, MetaValue> = {
  'general.architecture': str('llama'),
  u8: { type: 'u8', value: 200 }, i8: { type: 'i8', value: -100 }, u16: { type: 'u16', value: 60000 }, i16: { type: 'i16', value: -30000 },
  u32: u32(4_000_000_000), i32: { type: 'i32', value: -2_000_000_000 }, f32: { type: 'f32', value: 0.5 },
  u64: { type: 'u64', value: 2n ** 40n }, i64: { type: 'i64', value: -(2n ** 40n) }, f64: { type: 'f64', value: 0.1 },
  big: { type: 'u64', value: 2n ** 63n }, yes: { type: 'bool', value: true }, text: str('héllo ▁ world'),
  strings: { type: 'array', elem: 'string', value: ['a', '', 'Ġthe'] },
  ints: { type: 'array', elem: 'i32', value: [1, -2, 3] },
  floats: { type: 'array', elem: 'f32', value: [0.25, -1.5] },
  empty: { type: 'array', elem: 'u8', value: [] },
};

describe('GGUF header', () => {
  it('reads metadata of every type, arrays included', () => {
    const g = readGgufHeader(file('every.gguf', ggufBytes(everyType)));
    expect(g.version).toBe(3);
    expect(Object.fromEntries(g.metadata)).toEqual({
      'general.architecture': 'llama', u8: 200, i8: -100, u16: 60000, i16: -30000, u32: 4_000_000_000, i32: -2_000_000_000, f32: 0.5,
      u64: 2 ** 40, i64: -(2 ** 40), f64: 0.1, big: 2n ** 63n, yes: true, text: 'héllo ▁ world',
      strings: ['a', '', 'Ġthe'], ints: [1, -2, 3], floats: [0.25, -1.5], empty: [],
    });
  });

  it('places tensors after the aligned header, with their byte ranges and data', () => {
    for (const align of [32, 64]) {
      const meta: Record<string, MetaValue> = { 'general.architecture': str('llama'), ...(align !== 32 ? { 'general.alignment': u32(align) } : {}) };
      const a = f32Bytes([1, 2, 3]);
      const b = f32Bytes([4, 5, 6, 7, 8, 9]);
      const g = readGgufHeader(file(`t${align}.gguf`, ggufBytes(meta, [{ name: 'a', dims: [3], type: 0, bytes: a }, { name: 'b', dims: [3, 2], type: 0, bytes: b }])));
      expect(g.alignment).toBe(align);
      expect(g.dataOffset % align).toBe(0);
      expect(g.tensors.map((t) => [t.name, t.dims, t.type, t.end - t.begin])).toEqual([['a', [3], 0, 12], ['b', [3, 2], 0, 24]]);
      expect(g.tensors[1]!.begin - g.tensors[0]!.begin).toBe(align);
      expect([...new Float32Array(readGgufTensorBytes(g.tensors[1]!).buffer, 0, 6)]).toEqual([4, 5, 6, 7, 8, 9]);
    }
  });

  it('refuses what is not GGUF, or another version', () => {
    expect(userError(() => readGgufHeader(file('not.gguf', Buffer.from('{"a": 1}'))))).toMatch(/not a GGUF file/);
    expect(userError(() => readGgufHeader(file('v1.gguf', ggufBytes({}, [], 1))))).toMatch(/GGUF version 1 is not supported/);
    expect(userError(() => readGgufHeader(path.join(dir, 'missing.gguf')))).toMatch(/cannot open .*ENOENT/);
  });

  it('refuses a file cut anywhere with one line, never a crash', () => {
    const whole = ggufBytes(everyType, [{ name: 'w', dims: [4], type: 0, bytes: f32Bytes([1, 2, 3, 4]) }]);
    const end = readGgufHeader(file('whole.gguf', whole)).tensors[0]!.end; // what follows is padding
    for (let cut = 1; cut < end; cut += 7) {
      const message = userError(() => readGgufHeader(file('cut.gguf', whole.subarray(0, cut))));
      expect(message).toMatch(/cut\.gguf: (truncated or corrupt GGUF|not a GGUF file)/);
    }
  });

  it('refuses a string or array longer than the file could hold, before allocating it', () => {
    const bytes = ggufBytes({ s: str('abc') });
    // The string's length field follows magic, version, counts, the key (8 + 1) and its type.
    const at = 4 + 4 + 8 + 8 + 8 + 1 + 4;
    const lying = Buffer.from(bytes);
    lying.writeBigUInt64LE(2n ** 40n, at);
    expect(userError(() => readGgufHeader(file('longstring.gguf', lying)))).toMatch(/metadata 's' at byte \d+ needs 1099511627776 bytes/);
    lying.writeBigUInt64LE(2n ** 62n, at);
    expect(userError(() => readGgufHeader(file('hugestring.gguf', lying)))).toMatch(/truncated or corrupt GGUF: metadata 's''s length/);

    const arr = Buffer.from(ggufBytes({ a: { type: 'array', elem: 'string', value: ['x'] } }));
    arr.writeBigUInt64LE(10n ** 9n, 4 + 4 + 8 + 8 + 8 + 1 + 4 + 4);
    expect(userError(() => readGgufHeader(file('longarray.gguf', arr)))).toMatch(/metadata 'a' \(an array of 1000000000\) .* needs 8000000000 bytes/);

    const counts = Buffer.from(ggufBytes({}));
    counts.writeBigUInt64LE(10n ** 12n, 16);
    expect(userError(() => readGgufHeader(file('manykv.gguf', counts)))).toMatch(/1000000000000 metadata entries/);
  });

  it('refuses a tensor whose bytes lie past the end, of an unknown type, or with ragged blocks', () => {
    const t = { name: 'w', dims: [32, 2], type: 8, bytes: new Uint8Array(68) };
    const whole = ggufBytes({}, [t]);
    const end = readGgufHeader(file('whole.gguf', whole)).tensors[0]!.end;
    expect(userError(() => readGgufHeader(file('short.gguf', whole.subarray(0, end - 1))))).toMatch(/tensor 'w' \(Q8_0 \[32,2\]\) needs bytes/);
    expect(userError(() => readGgufHeader(file('unknown.gguf', ggufBytes({}, [{ ...t, type: 99 }]))))).toMatch(/tensor 'w' has unknown ggml type 99/);
    expect(userError(() => readGgufHeader(file('ragged.gguf', ggufBytes({}, [{ ...t, dims: [16, 4] }]))))).toMatch(/rows of 16, not a multiple of Q8_0's block of 32/);
    expect(userError(() => readGgufHeader(file('dims.gguf', ggufBytes({}, [{ ...t, dims: [32, 1, 1, 1, 2] }]))))).toMatch(/5 dimensions/);
    expect(userError(() => readGgufHeader(file('twice.gguf', ggufBytes({}, [t, t]))))).toMatch(/tensor 'w' appears twice/);
  });
});

describe('GGUF split files', () => {
  const part = (no: number, tensors: string[]) => ggufBytes(
    { 'general.architecture': str('llama'), 'split.no': { type: 'u16', value: no }, 'split.count': { type: 'u16', value: 2 }, 'split.tensors.count': { type: 'i32', value: 3 } },
    tensors.map((name, i) => ({ name, dims: [2], type: 0, bytes: f32Bytes([no, i]) })),
  );

  it('opens every part from any of them, tensors from each with its own data offset', () => {
    const first = file('m-00001-of-00002.gguf', part(0, ['a', 'b']));
    const second = file('m-00002-of-00002.gguf', part(1, ['c']));
    for (const f of [first, second]) {
      const g = openGguf(f);
      expect(g.files).toEqual([first, second]);
      expect(g.tensors.map((t) => `${t.name}@${path.basename(t.file)}`)).toEqual(['a@m-00001-of-00002.gguf', 'b@m-00001-of-00002.gguf', 'c@m-00002-of-00002.gguf']);
      expect([...new Float32Array(readGgufTensorBytes(g.tensors[2]!).buffer, 0, 2)]).toEqual([1, 0]);
    }
  });

  it('names a missing part, or a part renamed out of its split', () => {
    const lone = file('n-00001-of-00002.gguf', part(0, ['a', 'b']));
    expect(userError(() => openGguf(lone))).toMatch(/part n-00002-of-00002\.gguf of the split model is missing/);
    expect(userError(() => openGguf(file('renamed.gguf', part(0, ['a', 'b']))))).toMatch(/part of a 2-part split model/);
  });
});

it('writes and reads a model file whole (the test writer round-trips)', () => {
  const p = path.join(dir, 'round.gguf');
  writeGguf(p, { 'general.architecture': str('qwen2') }, [{ name: 'x', dims: [1], type: 0, bytes: f32Bytes([7]) }]);
  expect(openGguf(p).metadata.get('general.architecture')).toBe('qwen2');
});

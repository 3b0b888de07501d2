/**
 * Crash-safe writes of the trainer's outputs: every file goes to a temp name beside its
 * target, is fsynced, and is renamed into place, so a killed run leaves either the old file
 * or the new one (see store/atomic-file.ts, whose writer this reuses). They are created
 * readable by their owner only (0600): a run's weights, rows and settings come from private chats.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import { writeSafetensors, type TensorToWrite } from '../model/safetensors.js';

let counter = 0;

export function writeJsonAtomic(file: string, value: unknown): void {
  writeTextAtomic(file, JSON.stringify(value, null, 2) + '\n');
}

export function writeTextAtomic(file: string, text: string): void {
  writeFileAtomicSync(file, Buffer.from(text, 'utf8'), PRIVATE_FILE_MODE);
}

/** fp32 tensors as a safetensors file, written atomically and durably. */
export function writeSafetensorsAtomic(file: string, tensors: Record<string, TensorToWrite>, metadata?: Record<string, string>): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const temp = `${file}.tmp-${process.pid}-${++counter}`;
  try {
    writeSafetensors(temp, tensors, metadata, PRIVATE_FILE_MODE);
    const fd = fs.openSync(temp, 'r+');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
  } catch (err) {
    fs.rmSync(temp, { force: true });
    throw err;
  }
  fsyncDir(path.dirname(path.resolve(file)));
}

export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // Not possible on Windows (EISDIR/EPERM); the rename is still atomic there.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** fp32 maps as safetensors F32 tensors with their 2-D shapes. */
export function f32Tensors(weights: ReadonlyMap<string, Float32Array>, shapes: ReadonlyMap<string, number[]>, prefix = ''): Record<string, TensorToWrite> {
  const out: Record<string, TensorToWrite> = {};
  for (const [key, data] of weights) {
    const shape = shapes.get(key);
    if (!shape) throw new Error(`no shape known for tensor ${key}`);
    out[prefix + key] = { dtype: 'F32', shape, data };
  }
  return out;
}

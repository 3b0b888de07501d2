// Test helpers for the importers: temp files, a minimal zip writer and a ChatGPT tree builder.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll } from 'vitest';
import type { ImportedConversation } from '../../src-shared/types.js';
import { openExport, type FormatChoice, type OpenedExport } from '../../src-main/import/importer.js';

/** A temp directory removed after the test file. */
export function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hindsight-import-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function writeJson(dir: string, name: string, value: unknown): string {
  return writeText(dir, name, JSON.stringify(value));
}

export function writeText(dir: string, name: string, text: string | Buffer): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

export async function importAll(
  file: string,
  format?: FormatChoice,
): Promise<{ opened: OpenedExport; conversations: ImportedConversation[] }> {
  const opened = await openExport(file, format);
  const conversations: ImportedConversation[] = [];
  for await (const conversation of opened.conversations()) conversations.push(conversation);
  return { opened, conversations };
}

export const roles = (c: ImportedConversation) => c.turns.map((t) => t.role);

/**
 * Writes a zip archive. No zip writer is a direct dependency of the project, so the tests carry
 * this small one (local headers, central directory, end record; stored or deflated entries).
 */
export function writeZip(file: string, entries: { name: string; data: string | Buffer; deflate?: boolean }[]): string {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const data = Buffer.isBuffer(entry.data) ? entry.data : Buffer.from(entry.data);
    const method = entry.deflate === false ? 0 : 8;
    const stored = method === 8 ? zlib.deflateRawSync(data) : data;
    const name = Buffer.from(entry.name);
    const crc = zlib.crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(method, 8);
    local.writeUInt16LE(0, 10);
    local.writeUInt16LE(0x21, 12); // 1980-01-01
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(stored.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt16LE(0, 12);
    central.writeUInt16LE(0x21, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(stored.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, stored);
    centrals.push(central, name);
    offset += local.length + name.length + stored.length;
  }
  const centralSize = centrals.reduce((n, b) => n + b.length, 0);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(centralSize, 12);
  end.writeUInt32LE(offset, 16);
  writeFileSync(file, Buffer.concat([...locals, ...centrals, end]));
  return file;
}

/** One node of a ChatGPT `mapping`; `message` null for the root. */
export interface NodeSpec {
  id: string;
  parent: string | null;
  role?: 'system' | 'user' | 'assistant' | 'tool';
  /** Plain text shorthand for {content_type:'text', parts:[text]}. */
  text?: string;
  content?: Record<string, unknown>;
  /** Extra message fields (recipient, metadata, status, author name …). */
  message?: Record<string, unknown>;
  authorName?: string;
}

/**
 * Builds a ChatGPT conversation from nodes in the order given (which becomes the mapping's key
 * order); `children` are derived from the parents, create_time rises with the order.
 */
export function chatgptConversation(
  nodes: NodeSpec[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const mapping: Record<string, unknown> = {};
  nodes.forEach((spec, i) => {
    const message = spec.role
      ? {
          id: spec.id,
          author: { role: spec.role, name: spec.authorName ?? null, metadata: {} },
          create_time: 1_700_000_000 + i,
          content: spec.content ?? { content_type: 'text', parts: [spec.text ?? ''] },
          status: 'finished_successfully',
          end_turn: true,
          weight: 1,
          metadata: {},
          recipient: 'all',
          ...spec.message,
        }
      : null;
    mapping[spec.id] = {
      id: spec.id,
      message,
      parent: spec.parent,
      children: nodes.filter((n) => n.parent === spec.id).map((n) => n.id),
    };
  });
  return {
    title: 'Test conversation',
    create_time: 1_700_000_000,
    update_time: 1_700_000_100,
    mapping,
    conversation_id: 'conv-1',
    id: 'conv-1',
    current_node: nodes[nodes.length - 1]!.id,
    ...extra,
  };
}

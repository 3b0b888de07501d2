// Oversized /api bodies, as a real client sends them: the answer is a 413 in the contract's
// error shape, the connection closes cleanly (no "empty reply", no "connection reset"), and
// the server does not wait for (or read) the rest of the body before answering.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';

const MiB = 1024 * 1024;
const CALL_LIMIT = 4 * MiB;
let dir: string;
let server: ServeHandle;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-body-limit-'));
  server = await serveApp({ dbPath: path.join(dir, 'test.db'), port: 0, buildRenderer: false });
});

afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  connection: string | undefined;
  body: { ok: boolean; error: { kind: string; message: string } };
}

/**
 * Sends `send` bytes of a body and never finishes it: only an answer that comes before the
 * body does ends the wait. `declaredLength` sets Content-Length; without it the body is chunked.
 */
function postWithoutFinishing(call: string, send: number, declaredLength?: number): Promise<Answer & { sent: number }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` };
    if (declaredLength !== undefined) headers['Content-Length'] = declaredLength;
    const req = http.request({ host: '127.0.0.1', port: server.port, path: `/api/${call}`, method: 'POST', headers });
    let sent = 0;
    let answered = false;
    const piece = Buffer.alloc(64 * 1024, 0x20);
    const writeMore = () => {
      while (!answered && sent < send) {
        const n = Math.min(piece.length, send - sent);
        sent += n;
        if (!req.write(piece.subarray(0, n))) return void req.once('drain', writeMore);
      }
    };
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, connection: res.headers.connection, body: JSON.parse(Buffer.concat(chunks).toString('utf8')), sent });
      });
      res.on('error', reject);
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    writeMore();
  });
}

function curl(args: string[], stdin?: (input: NodeJS.WritableStream) => void): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '-w', '\n%{http_code}', '-H', 'Content-Type: application/json', '-H', `Authorization: Bearer ${server.token}`, ...args]);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.on('error', () => {}); // curl may stop reading once it has the answer
    if (stdin) stdin(child.stdin);
    else child.stdin.end();
  });
}

function parseCurl(out: { stdout: string }): { status: number; body: Answer['body'] } {
  const cut = out.stdout.lastIndexOf('\n');
  return { status: Number(out.stdout.slice(cut + 1)), body: JSON.parse(out.stdout.slice(0, cut)) };
}

const hasCurl = await new Promise<boolean>((resolve) => {
  const probe = spawn('curl', ['--version']);
  probe.on('error', () => resolve(false));
  probe.on('close', (code) => resolve(code === 0));
});

function expectTooLarge(answer: { status: number; body: Answer['body'] }, mb: number): void {
  expect(answer.status).toBe(413);
  expect(answer.body.ok).toBe(false);
  expect(answer.body.error.kind).toBe('validation');
  expect(answer.body.error.message).toMatch(new RegExp(`larger than ${mb} MB`));
}

async function stillServes(): Promise<void> {
  const res = await fetch(`${server.url}api/stats`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` }, body: '{}' });
  expect(res.status).toBe(200);
}

describe('serve: oversized request bodies', () => {
  it('answers a declared oversized body with 413 before the body is sent', async () => {
    const answer = await postWithoutFinishing('stats', 64 * 1024, CALL_LIMIT + 1);
    expectTooLarge(answer, 4);
    expect(answer.connection).toBe('close');
    await stillServes();
  });

  it('answers a 290 MB importUpload with 413 before the body is sent', async () => {
    const answer = await postWithoutFinishing('importUpload', 64 * 1024, 290 * 1000 * 1000);
    expectTooLarge(answer, 267);
    await stillServes();
  });

  it('stops reading a chunked body at the limit and answers 413', async () => {
    // 64 times the limit is offered, and the answer must come long before it is all sent.
    // (Not 2 times: the server discards what arrives past the limit, and on a loaded machine
    // a client can push a few more MiB through loopback before the answer is written.)
    const offered = 64 * CALL_LIMIT;
    const answer = await postWithoutFinishing('stats', offered);
    expectTooLarge(answer, 4);
    expect(answer.connection).toBe('close');
    expect(answer.sent).toBeLessThan(offered);
    await stillServes();
  });

  it.skipIf(!hasCurl)('curl gets the 413 for a 4 MiB + 1 body (was: empty reply)', async () => {
    const file = path.join(dir, 'big.json');
    fs.writeFileSync(file, Buffer.alloc(CALL_LIMIT + 1, 0x20));
    const out = await curl(['--data-binary', `@${file}`, `${server.url}api/stats`]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expectTooLarge(parseCurl(out), 4);
    await stillServes();
  });

  it.skipIf(!hasCurl)('curl gets the 413 for a chunked 5 MB body (was: connection reset)', async () => {
    const out = await curl(['-H', 'Transfer-Encoding: chunked', '--data-binary', '@-', `${server.url}api/stats`], (stdin) => {
      stdin.end(Buffer.alloc(5 * 1000 * 1000, 0x20));
    });
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expectTooLarge(parseCurl(out), 4);
    await stillServes();
  });

  it.skipIf(!hasCurl)('curl gets the 413 for a 290 MB importUpload (was: connection reset)', async () => {
    // A sparse file: 290 MB to send, none of it on disk.
    const file = path.join(dir, 'huge.json');
    fs.closeSync(fs.openSync(file, 'w'));
    fs.truncateSync(file, 290 * 1000 * 1000);
    const started = Date.now();
    const out = await curl(['-X', 'POST', '-T', file, `${server.url}api/importUpload`]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expectTooLarge(parseCurl(out), 267);
    expect(Date.now() - started).toBeLessThan(20_000);
    await stillServes();
  });
});

// Tool execution (src-main/rollout/tools.ts, user-tools.ts, builtin-tools.ts): every way a
// model's call can fail comes back as a failed record with a one-line reason, never a throw;
// user tools run against a real loopback HTTP server (one route sleeps past the timeout);
// non-loopback URLs and bad schema files are refused with one-line errors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { ToolRegistry, type Tool } from '../../src-main/rollout/tools.js';
import { builtinTools, currentTimeTool, isoInZone } from '../../src-main/rollout/builtin-tools.js';
import { loopbackUrl, readToolSchemas, userTools } from '../../src-main/rollout/user-tools.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-tools-'));
let server: http.Server;
let url: URL;
const received: unknown[] = [];
const sleepers: NodeJS.Timeout[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const call = JSON.parse(body) as { name: string; arguments: Record<string, unknown> };
      received.push(call);
      if (call.name === 'slow') return void sleepers.push(setTimeout(() => res.end('too late'), 5_000));
      if (call.name === 'broken') return void res.writeHead(500).end(JSON.stringify({ error: 'the database is down' }));
      if (call.name === 'refuses') return void res.end(JSON.stringify({ error: 'no such city' }));
      if (call.name === 'weather') return void res.end(JSON.stringify({ result: { city: call.arguments.city, celsius: 21 } }));
      res.end(`plain ${JSON.stringify(call.arguments)}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/tool`);
});
afterAll(async () => {
  sleepers.forEach(clearTimeout);
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(root, { recursive: true, force: true });
});

const schema = (name: string) => ({ type: 'function' as const, function: { name, description: `the ${name} tool`, parameters: { type: 'object' } } });

describe('tool execution errors become tool results', () => {
  const thrower: Tool = { schema: schema('thrower'), run: () => { throw new Error('the disk\nis full'); } };
  const registry = new ToolRegistry([...builtinTools(), thrower], { timeoutMs: 300 });

  it('runs a good call', async () => {
    const r = await registry.execute('calculator', '{"expression":"2+2"}');
    expect(r).toMatchObject({ name: 'calculator', ok: true, result: '4', arguments: { expression: '2+2' } });
    expect(r.ms).toBeGreaterThanOrEqual(0);
  });

  it('invalid JSON arguments, arguments that are not an object, an unknown tool, a thrown error', async () => {
    expect(await registry.execute('calculator', '{"expression": 2+')).toMatchObject({ ok: false, result: expect.stringMatching(/^error: the arguments are not valid JSON/) });
    expect(await registry.execute('calculator', '[1,2]')).toMatchObject({ ok: false, result: 'error: the arguments must be a JSON object, got an array' });
    expect(await registry.execute('launch_rockets', '{}')).toMatchObject({ ok: false, result: "error: unknown tool 'launch_rockets' (available: calculator, current_time, thrower)" });
    const thrown = await registry.execute('thrower', {});
    expect(thrown).toMatchObject({ ok: false, result: 'error: thrower failed: the disk is full' });
    expect(await registry.execute('calculator', '{"expression":"1/0"}')).toMatchObject({ ok: false, result: 'error: calculator failed: division by zero' });
  });

  it('a timeout against a real loopback server that sleeps; the other user tools answer', async () => {
    const tools = new ToolRegistry(userTools(['slow', 'broken', 'refuses', 'weather', 'echo'].map(schema), url), { timeoutMs: 300 });
    const started = Date.now();
    const slow = await tools.execute('slow', { n: 1 });
    expect(slow).toMatchObject({ ok: false, result: 'error: slow did not answer within 300 ms' });
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(await tools.execute('broken', {})).toMatchObject({ ok: false, result: 'error: broken failed: the tool endpoint answered 500: the database is down' });
    expect(await tools.execute('refuses', {})).toMatchObject({ ok: false, result: 'error: refuses failed: the tool reported: no such city' });
    expect(await tools.execute('weather', '{"city":"Lyon"}')).toMatchObject({ ok: true, result: '{"city":"Lyon","celsius":21}' });
    expect(await tools.execute('echo', { a: [1] })).toMatchObject({ ok: true, result: 'plain {"a":[1]}' });
    expect(received).toContainEqual({ name: 'weather', arguments: { city: 'Lyon' } });
  });

  it('an endpoint nobody listens on is a failed call', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const tools = new ToolRegistry(userTools([schema('gone')], new URL(`http://localhost:${port}/`)), { timeoutMs: 2000 });
    expect(await tools.execute('gone', {})).toMatchObject({ ok: false, result: 'error: gone failed: cannot reach the tool endpoint: ECONNREFUSED' });
  });
});

describe('user tools: loopback only, schemas checked', () => {
  it('accepts loopback URLs and refuses anything else in one line', () => {
    for (const ok of ['http://127.0.0.1:8000/x', 'http://localhost:1/', 'http://[::1]:9/t', 'http://127.8.0.1/']) expect(loopbackUrl(ok).protocol).toBe('http:');
    expect(() => loopbackUrl('http://example.com/tool')).toThrow(/must point at this machine .* not example.com/);
    expect(() => loopbackUrl('http://10.0.0.1/tool')).toThrow(/must point at this machine/);
    expect(() => loopbackUrl('http://127.0.0.1.nip.io/')).toThrow(/must point at this machine/);
    expect(() => loopbackUrl('https://127.0.0.1/')).toThrow(/must be http:\/\//);
    expect(() => loopbackUrl('file:///etc/passwd')).toThrow(/must be http:\/\//);
    expect(() => loopbackUrl('http://user:pw@127.0.0.1/')).toThrow(/user name or password/);
    expect(() => loopbackUrl('not a url')).toThrow(/is not a URL/);
  });

  it('reads a schema file and names the entry of every problem', () => {
    const file = path.join(root, 'tools.json');
    const write = (v: unknown) => fs.writeFileSync(file, typeof v === 'string' ? v : JSON.stringify(v));
    write([schema('weather'), schema('route')]);
    expect(readToolSchemas(file).map((s) => s.function.name)).toEqual(['weather', 'route']);
    write('[{');
    expect(() => readToolSchemas(file)).toThrow(/tools.json: invalid JSON/);
    write({ tools: [] });
    expect(() => readToolSchemas(file)).toThrow(/expected a JSON array/);
    write([schema('ok'), { type: 'function', function: { name: 'bad name' } }]);
    expect(() => readToolSchemas(file)).toThrow(/tool 2: "function.name" must be 1–64/);
    write([{ type: 'tool', function: { name: 'x' } }]);
    expect(() => readToolSchemas(file)).toThrow(/tool 1: "type" must be "function"/);
    write([schema('calculator')]);
    expect(() => readToolSchemas(file)).toThrow(/'calculator' is the name of a built-in tool/);
    write([schema('a'), schema('a')]);
    expect(() => readToolSchemas(file)).toThrow(/tool 2: a second tool named 'a'/);
    expect(() => readToolSchemas(path.join(root, 'missing.json'))).toThrow(/cannot read .*ENOENT/);
  });
});

describe('current_time', () => {
  const noon = new Date('2024-07-01T12:00:05.750Z');
  it('gives ISO 8601 with the offset of an IANA zone, UTC by default', async () => {
    expect(isoInZone(noon, 'UTC')).toBe('2024-07-01T12:00:05Z');
    expect(isoInZone(noon, 'Europe/Paris')).toBe('2024-07-01T14:00:05+02:00');
    expect(isoInZone(noon, 'America/St_Johns')).toBe('2024-07-01T09:30:05-02:30');
    expect(isoInZone(new Date('2024-01-01T00:00:00Z'), 'Asia/Kolkata')).toBe('2024-01-01T05:30:00+05:30');
    const registry = new ToolRegistry([currentTimeTool(() => noon)]);
    expect(await registry.execute('current_time', {})).toMatchObject({ ok: true, result: '2024-07-01T12:00:05Z' });
    expect(await registry.execute('current_time', { timezone: 'Mars/Olympus' })).toMatchObject({ ok: false, result: expect.stringMatching(/unknown time zone 'Mars\/Olympus'/) });
  });
});

/**
 * Live-capture soak (`npx tsx bench/soak.ts [--clients 8] [--requests 400] [--seconds 120]
 * [--max-tokens 8] [--upstream]`).
 *
 * Starts `serve` with capture on (a temporary database), the demo model answering — or,
 * with `--upstream`, a second Hindsight endpoint answering through proxy mode — and holds
 * N concurrent clients on loopback until a fixed number of requests is done (or the time
 * bound is reached). Each client runs growing multi-turn conversations, a third of them
 * streamed, every fifth request a side request, alternating sessions by X-Session-Id and by
 * prefix continuity. At the end it checks that every answered request is in the database
 * (exchanges recorded = answers), then prints throughput, latency and errors. An error is
 * any non-200 answer, a broken stream, or a missing record. Not part of `npm test`; a small
 * bounded run of it is (test/capture/soak.test.ts), asserting zero errors.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { serveApp } from '../src-main/api/serve-app.js';
import type { Workspace } from '../src-main/workspace/workspace.js';
import { startOpenAiServer, type OpenAiServer } from '../src-main/openai/server.js';

const DEMO_MODEL = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../resources/models/stories260K');

export interface SoakOptions {
  clients: number;
  requests: number;
  seconds: number;
  maxTokens: number;
  upstream: boolean;
}

export interface SoakResult {
  requests: number;
  ok: number;
  errors: string[];
  recorded: number;
  seconds: number;
  requestsPerSecond: number;
  p50Ms: number;
  p95Ms: number;
  sessions: number;
  samples: number;
}

type Message = { role: string; content: string };

async function ask(base: string, token: string, messages: Message[], headers: Record<string, string>, stream: boolean, maxTokens: number): Promise<string> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ messages, max_tokens: maxTokens, stream }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
  if (!stream) return ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content ?? '';
  const events = (await res.text()).split('\n\n').filter(Boolean);
  if (events.at(-1) !== 'data: [DONE]') throw new Error('stream ended without [DONE]');
  let content = '';
  for (const e of events.slice(0, -1)) {
    const chunk = JSON.parse(e.slice(6)) as { error?: { message: string }; choices?: { delta?: { content?: string } }[] };
    if (chunk.error) throw new Error(`stream error: ${chunk.error.message}`);
    content += chunk.choices?.[0]?.delta?.content ?? '';
  }
  return content;
}

export async function runSoak(options: SoakOptions, log: (line: string) => void = () => {}): Promise<SoakResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-soak-'));
  let upstream: OpenAiServer | null = null;
  if (options.upstream) upstream = await startOpenAiServer({ modelDir: DEMO_MODEL, port: 0 });
  const server = await serveApp({
    dbPath: path.join(dir, 'soak.db'),
    port: 0,
    buildRenderer: false,
    capture: true,
    openaiModelDir: DEMO_MODEL,
    ...(upstream ? { upstream: { baseUrl: upstream.baseUrl, apiKey: upstream.token } } : {}),
  });
  const base = `${server.url}v1`;
  const errors: string[] = [];
  const latencies: number[] = [];
  let issued = 0;
  const deadline = Date.now() + options.seconds * 1000;
  const started = Date.now();
  const client = async (c: number) => {
    let conversation = 0;
    while (issued < options.requests && Date.now() < deadline) {
      // One conversation of 2–4 main turns.
      const keyed = conversation % 2 === 0;
      const headers: Record<string, string> = keyed ? { 'X-Session-Id': `soak-${c}-${conversation}` } : {};
      let messages: Message[] = [{ role: 'user', content: `Client ${c} conversation ${conversation}: tell me a story.` }];
      for (let turn = 0; turn < 2 + (conversation % 3) && issued < options.requests && Date.now() < deadline; turn++) {
        const n = issued++;
        const side = n % 5 === 4;
        const t0 = Date.now();
        try {
          if (side) {
            await ask(base, server.token, [{ role: 'user', content: 'Give this chat a title.' }], { ...headers, 'X-Turn-Type': 'side' }, false, options.maxTokens);
          } else {
            const reply = await ask(base, server.token, messages, headers, n % 3 === 0, options.maxTokens);
            messages = [...messages, { role: 'assistant', content: reply }, { role: 'user', content: turn % 2 ? 'No, make it shorter.' : 'Thanks! Go on.' }];
          }
          latencies.push(Date.now() - t0);
        } catch (err) {
          errors.push(`client ${c} request ${n}: ${(err as Error).message}`);
        }
      }
      conversation++;
    }
  };
  try {
    await Promise.all(Array.from({ length: options.clients }, (_, c) => client(c)));
    const seconds = (Date.now() - started) / 1000;
    const ws = server.service.currentWorkspace as Workspace;
    const recorded = ws.captureExchanges().length;
    if (recorded !== latencies.length) errors.push(`${latencies.length} requests were answered but ${recorded} exchanges are recorded`);
    const sorted = [...latencies].sort((a, b) => a - b);
    const pct = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]! : 0);
    const stats = ws.stats();
    const result: SoakResult = {
      requests: issued,
      ok: latencies.length,
      errors,
      recorded,
      seconds,
      requestsPerSecond: latencies.length / seconds,
      p50Ms: pct(0.5),
      p95Ms: pct(0.95),
      sessions: stats.sessions,
      samples: stats.samples,
    };
    log(
      `soak: ${options.clients} clients, ${result.ok}/${result.requests} answered in ${seconds.toFixed(1)} s ` +
        `(${result.requestsPerSecond.toFixed(1)} req/s, p50 ${result.p50Ms} ms, p95 ${result.p95Ms} ms), ` +
        `${result.recorded} exchanges recorded, ${result.sessions} sessions, ${result.samples} samples, ${errors.length} errors` +
        (upstream ? ' [proxy to a second Hindsight]' : ' [local model]'),
    );
    return result;
  } finally {
    await server.close();
    await upstream?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      clients: { type: 'string', default: '8' },
      requests: { type: 'string', default: '400' },
      seconds: { type: 'string', default: '120' },
      'max-tokens': { type: 'string', default: '8' },
      upstream: { type: 'boolean', default: false },
    },
  });
  const num = (name: string, v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) {
      process.stderr.write(`--${name} must be a whole number ≥ 1, got '${v}'\n`);
      process.exit(2);
    }
    return n;
  };
  const result = await runSoak(
    {
      clients: num('clients', values.clients!),
      requests: num('requests', values.requests!),
      seconds: num('seconds', values.seconds!),
      maxTokens: num('max-tokens', values['max-tokens']!),
      upstream: values.upstream!,
    },
    (line) => process.stdout.write(line + '\n'),
  );
  for (const e of result.errors.slice(0, 20)) process.stdout.write(`  error: ${e}\n`);
  process.exitCode = result.errors.length ? 1 : 0;
}

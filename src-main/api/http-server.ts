// The HTTP transport of the API contract, for `hindsight serve`: the browser UI, a GPU box
// reached over an SSH tunnel, and the browser tests.
//
//   POST /api/<call>   JSON body = the call's input → {ok:true,value} | {ok:false,error}
//   GET  /api/events   server-sent events: `data: {"name": …, "payload": …}`
//   GET  /api          the list of calls with one line each
//   GET  /…            the built renderer (index.html for any page path)
//
// Security model (see also the README):
//   - Loopback only: it listens on 127.0.0.1 (or ::1 / localhost); any other --host is refused.
//   - A random token per launch. The printed URL carries it once as `?token=`; that first
//     load sets it as an HttpOnly, SameSite=Strict cookie and redirects to the same page
//     without it, so the token leaves the address bar and history. Scripts and tests may
//     send `Authorization: Bearer <token>` instead. Everything else gets 401.
//   - The Host header must name the loopback address and port (defeats DNS rebinding); a
//     request with a foreign Origin is refused; API calls must be `application/json`
//     (a cross-site form cannot send that without a preflight, which is never granted).
//   - A strict Content-Security-Policy on every response: no inline or eval'd script.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { CALLS, MAX_UPLOAD_BYTES, type ApiErrorBody, type ApiHandlers, type CallResult } from '../../src-shared/contract.js';
import { CONTENT_SECURITY_POLICY } from './csp.js';
import { runCall } from './errors.js';
import type { EventHub } from '../workspace/event-hub.js';

const COOKIE = 'hindsight_token';
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1']);
const MAX_CALL_BODY = 4 * 1024 * 1024;
/** Base64 inflates by 4/3; leave room for the JSON around it. */
const MAX_UPLOAD_BODY = Math.ceil(MAX_UPLOAD_BYTES / 3) * 4 + 64 * 1024;

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

export interface HttpServerOptions {
  handlers: ApiHandlers;
  events: EventHub;
  host?: string;
  port?: number;
  /** The per-launch secret; generated when omitted. */
  token?: string;
  /** The built renderer (index.html and assets); null serves the API only. */
  rendererDir: string | null;
  /**
   * The OpenAI-compatible API under /v1 (src-main/openai/handler.ts). It does its own auth
   * (Bearer <token> only, no cookie) and answers OpenAI-shaped errors.
   */
  openai?: (req: http.IncomingMessage, res: http.ServerResponse, token: string) => Promise<void>;
}

export interface RunningServer {
  url: string;
  /** The URL to open first: it carries the token once. */
  loginUrl: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

/** Refuses anything but a loopback address: the API can read and write files as the user. */
export function assertLoopbackHost(host: string): void {
  if (!LOOPBACK_HOSTS.has(host)) {
    throw new UserError(
      `refusing to listen on '${host}': hindsight serve binds to loopback only (127.0.0.1, ::1 or localhost). ` +
        `To use it from another machine, forward the port over SSH (ssh -L 8787:127.0.0.1:8787 gpu-box).`,
    );
  }
}

export async function startHttpServer(options: HttpServerOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  assertLoopbackHost(host);
  const token = options.token ?? crypto.randomBytes(24).toString('base64url');
  const sseClients = new Set<http.ServerResponse>();
  let allowedHosts = new Set<string>();

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      process.stderr.write(`hindsight serve: ${(err as Error).stack ?? err}\n`);
      if (!res.headersSent) sendJson(res, 500, { ok: false, error: { kind: 'internal', message: 'Internal server error' } });
      else res.end();
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    setSecurityHeaders(res);
    if (!allowedHosts.has((req.headers.host ?? '').toLowerCase())) {
      return sendText(res, 403, 'Forbidden: unexpected Host header (hindsight serve answers on its loopback address only).');
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !allowedHosts.has(originHost(origin))) {
      return sendText(res, 403, 'Forbidden: cross-origin request.');
    }
    const url = new URL(req.url ?? '/', 'http://localhost');

    if (options.openai && (url.pathname === '/v1' || url.pathname.startsWith('/v1/'))) return options.openai(req, res, token);

    // First page load from the printed URL: trade the query token for a cookie.
    const queryToken = url.searchParams.get('token');
    if (queryToken !== null && req.method === 'GET' && !url.pathname.startsWith('/api/')) {
      if (!sameSecret(queryToken, token)) return sendText(res, 401, unauthorizedText);
      url.searchParams.delete('token');
      res.setHeader('Set-Cookie', `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`);
      res.writeHead(303, { Location: url.pathname + url.search + url.hash });
      return void res.end();
    }
    if (!isAuthorized(req, token)) {
      if (url.pathname.startsWith('/api')) return sendJson(res, 401, { ok: false, error: { kind: 'unauthorized', message: unauthorizedText } });
      return sendText(res, 401, unauthorizedText);
    }

    if (url.pathname === '/api/events' && req.method === 'GET') return openEventStream(req, res);
    if (url.pathname === '/api' && req.method === 'GET') {
      return sendJson(res, 200, Object.fromEntries(Object.entries(CALLS).map(([name, spec]) => [name, spec.doc])));
    }
    if (url.pathname.startsWith('/api/')) {
      if (req.method !== 'POST') return sendJson(res, 405, errorResult('validation', 'API calls use POST with a JSON body.'));
      return handleCall(req, res, safeDecode(url.pathname.slice('/api/'.length)));
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendText(res, 405, 'Method not allowed.');
    return serveStatic(res, url.pathname);
  }

  async function handleCall(req: http.IncomingMessage, res: http.ServerResponse, name: string): Promise<void> {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') {
      return sendJson(res, 415, errorResult('validation', `API calls need 'Content-Type: application/json' (got '${type || 'none'}').`));
    }
    const limit = name === 'importUpload' ? MAX_UPLOAD_BODY : MAX_CALL_BODY;
    let body: string;
    try {
      body = await readBody(req, limit);
    } catch (err) {
      return sendJson(res, 413, errorResult('validation', (err as Error).message));
    }
    let input: unknown = {};
    if (body.trim() !== '') {
      try {
        input = JSON.parse(body);
      } catch (err) {
        return sendJson(res, 400, errorResult('validation', `The request body is not valid JSON: ${(err as Error).message}`));
      }
    }
    const result = await runCall(options.handlers, name, input);
    sendJson(res, result.ok ? 200 : statusFor(result.error), result);
  }

  function openEventStream(req: http.IncomingMessage, res: http.ServerResponse): void {
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
    // A first comment flushes the headers so EventSource reports `open` at once.
    res.write(': connected\n\n');
    sseClients.add(res);
    req.on('close', () => sseClients.delete(res));
  }

  const unsubscribe = options.events.subscribe((name, payload) => {
    const frame = `data: ${JSON.stringify({ name, payload })}\n\n`;
    for (const client of sseClients) client.write(frame);
  });
  // Proxies and browsers drop idle streams; a comment every 20 s keeps them open.
  const heartbeat = setInterval(() => {
    for (const client of sseClients) client.write(': ping\n\n');
  }, 20_000);
  heartbeat.unref();

  function serveStatic(res: http.ServerResponse, pathname: string): void {
    const root = options.rendererDir;
    if (!root || !fs.existsSync(path.join(root, 'index.html'))) {
      return sendText(res, 503, 'The UI is not built. Run `npm run build` or start `hindsight serve`, which builds it.');
    }
    let file = path.resolve(root, '.' + path.posix.normalize(safeDecode(pathname)));
    if (!file.startsWith(path.resolve(root) + path.sep) && file !== path.resolve(root)) return sendText(res, 404, 'Not found.');
    if (!fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      // Page paths belong to the single-page app; a missing asset is a real 404.
      if (path.extname(pathname)) return sendText(res, 404, 'Not found.');
      file = path.join(root, 'index.html');
    }
    const ext = path.extname(file);
    res.writeHead(200, {
      'Content-Type': MIME[ext] ?? 'application/octet-stream',
      'Cache-Control': ext === '.html' ? 'no-store' : 'public, max-age=31536000, immutable',
    });
    fs.createReadStream(file).pipe(res);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new UserError(`port ${options.port} on ${host} is already in use; pick another with --port`) : err),
    );
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  allowedHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  const urlHost = host === '::1' ? '[::1]' : host;
  const base = `http://${urlHost}:${port}/`;

  return {
    url: base,
    loginUrl: `${base}?token=${token}`,
    port,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        unsubscribe();
        clearInterval(heartbeat);
        for (const client of sseClients) client.end();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const unauthorizedText =
  'Unauthorized: open the URL that `hindsight serve` printed (it carries this launch’s access token), ' +
  'or send `Authorization: Bearer <token>`.';

function isAuthorized(req: http.IncomingMessage, token: string): boolean {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ') && sameSecret(auth.slice(7).trim(), token)) return true;
  const cookie = parseCookies(req.headers.cookie)[COOKIE];
  return cookie !== undefined && sameSecret(cookie, token);
}

/** Constant-time comparison, so the token cannot be guessed byte by byte from timings. */
function sameSecret(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function originHost(origin: string): string {
  try {
    return new URL(origin).host.toLowerCase();
  } catch {
    return '';
  }
}

function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new Error(`The request body is larger than ${Math.round(limit / 1024 / 1024)} MB.`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function errorResult(kind: ApiErrorBody['kind'], message: string): CallResult<never> {
  return { ok: false, error: { kind, message } };
}

function statusFor(error: ApiErrorBody): number {
  switch (error.kind) {
    case 'validation':
      return 400;
    case 'unauthorized':
      return 401;
    case 'unknown_call':
      return 404;
    case 'user':
      return 422;
    case 'unavailable':
      return 501;
    default:
      return 500;
  }
}

function setSecurityHeaders(res: http.ServerResponse): void {
  res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(JSON.stringify(body));
}

function sendText(res: http.ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(text + '\n');
}

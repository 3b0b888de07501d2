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
//     load sets it as an HttpOnly, SameSite=Strict cookie (named for the port, so two servers
//     side by side keep their own) and redirects to the same page without it, so the token
//     leaves the address bar and history. Scripts and tests may send
//     `Authorization: Bearer <token>` instead. Everything else gets 401: a page load gets a
//     page that explains (./signin-page.ts: "Hindsight was restarted" when the cookie is an
//     earlier launch's, with a box to paste the printed link), a call gets the same words as
//     JSON, which the running app shows in a banner.
//   - /v1 (the OpenAI-compatible API) checks its own key: `openai` gets this launch's token
//     and decides (serve-app.ts also takes the stable API key of capture clients there).
//   - The Host header must name the loopback address and port (defeats DNS rebinding); a
//     request with a foreign Origin is refused; API calls must be `application/json`
//     (a cross-site form cannot send that without a preflight, which is never granted).
//   - A strict Content-Security-Policy on every response: no inline or eval'd script.
//   - A call's body is limited (4 MB; an upload's to its base64 size): a larger one gets 413
//     at once, unread, and that connection closes (src-main/http/json.ts).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { CALLS, MAX_UPLOAD_BYTES, type ApiErrorBody, type ApiHandlers, type CallResult } from '../../src-shared/contract.js';
import { assertLoopbackHost, hasBearerToken, listenOnLoopback, newAccessToken, sameSecret } from '../http/access.js';
import { BodyTooLargeError, mediaType, readBody, refuseOversizedBody, sendJson, sendJsonError, sendText } from '../http/json.js';
import { CONTENT_SECURITY_POLICY } from './csp.js';
import { sendSignInPage, tokenFromPasted, unauthorizedMessage } from './signin-page.js';
import { runCall } from './errors.js';
import type { EventHub } from '../workspace/event-hub.js';

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

export async function startHttpServer(options: HttpServerOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  assertLoopbackHost(host);
  const token = options.token ?? newAccessToken();
  const sseClients = new Set<http.ServerResponse>();
  let allowedHosts = new Set<string>();
  /** The session cookie's name, set once the port is known: `hindsight_token_<port>`. */
  let cookie = 'hindsight_token';
  let base = '';

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      process.stderr.write(`hindsight serve: ${(err as Error).stack ?? err}\n`);
      sendJsonError(res, 500, errorResult('internal', 'Internal server error'));
    });
  });

  function isAuthorized(req: http.IncomingMessage): boolean {
    return hasBearerToken(req, token) || sameSecret(parseCookies(req.headers.cookie)[cookie], token);
  }

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

    // First page load from the printed URL (or the sign-in page's form): trade the query token for a cookie.
    const queryToken = url.searchParams.get('token');
    if (queryToken !== null && req.method === 'GET' && !url.pathname.startsWith('/api/')) {
      if (!sameSecret(tokenFromPasted(queryToken), token)) return sendSignInPage(res, 'wrong-token', base, url.pathname);
      url.searchParams.delete('token');
      res.setHeader('Set-Cookie', `${cookie}=${token}; HttpOnly; SameSite=Strict; Path=/`);
      res.writeHead(303, { Location: url.pathname + url.search + url.hash });
      return void res.end();
    }
    if (!isAuthorized(req)) {
      // A cookie of this port that is not this launch's: the tab outlived a restart.
      const state = parseCookies(req.headers.cookie)[cookie] !== undefined ? 'expired' : 'signed-out';
      if (url.pathname.startsWith('/api')) {
        const message = req.headers.authorization !== undefined ? unauthorizedText : unauthorizedMessage(state);
        return sendJson(res, 401, { ok: false, error: { kind: 'unauthorized', message } });
      }
      if ((req.method === 'GET' || req.method === 'HEAD') && !path.extname(url.pathname)) return sendSignInPage(res, state, base, url.pathname);
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
    const type = mediaType(req);
    if (type !== 'application/json') {
      return sendJson(res, 415, errorResult('validation', `API calls need 'Content-Type: application/json' (got '${type || 'none'}').`));
    }
    const limit = name === 'importUpload' ? MAX_UPLOAD_BODY : MAX_CALL_BODY;
    let body: string;
    try {
      body = await readBody(req, limit);
    } catch (err) {
      if (err instanceof BodyTooLargeError) return refuseOversizedBody(res, errorResult('validation', err.message));
      throw err;
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

  const port = await listenOnLoopback(server, host, options.port ?? 0, '; pick another with --port');
  allowedHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  cookie = `hindsight_token_${port}`;
  const urlHost = host === '::1' ? '[::1]' : host;
  base = `http://${urlHost}:${port}/`;

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

// Who may talk to Hindsight's HTTP servers (`serve`'s /api and /v1, and the standalone /v1
// server): loopback addresses only, and a secret compared in constant time: the random access
// token of the launch (the UI, and /v1), or, on serve's /v1 only, the stable API key of capture
// clients (src-main/store/api-key-file.ts, src-main/capture/capture-key.ts).
import crypto from 'node:crypto';
import type http from 'node:http';
import { UserError } from '../../src-shared/types.js';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1']);

/** Refuses anything but a loopback address: the servers can read and write files as the user. */
export function assertLoopbackHost(host: string): void {
  if (!LOOPBACK_HOSTS.has(host)) {
    throw new UserError(
      `refusing to listen on '${host}': hindsight serve binds to loopback only (127.0.0.1, ::1 or localhost). ` +
        `To use it from another machine, forward the port over SSH (ssh -L 8787:127.0.0.1:8787 gpu-box).`,
    );
  }
}

/**
 * Starts `server` on a loopback address; resolves with the port (0 picks a free one).
 * `busyHint` ends the message when the port is taken.
 */
export async function listenOnLoopback(server: http.Server, host: string, port: number, busyHint = ''): Promise<number> {
  assertLoopbackHost(host);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new UserError(`port ${port} on ${host} is already in use${busyHint}`) : err),
    );
    server.listen(port, host, () => resolve());
  });
  return (server.address() as { port: number }).port;
}

/** A fresh secret for one launch. */
export function newAccessToken(): string {
  // Hex, not base64url: a token that starts with '-' reads as a flag when pasted after
  // `--api-key` on a command line (found by a test, one launch in 64).
  return crypto.randomBytes(24).toString('hex');
}

/** Constant-time comparison, so the token cannot be guessed byte by byte from timings. */
export function sameSecret(given: string | null | undefined, token: string): boolean {
  if (given == null) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

/** The secret of `Authorization: Bearer <secret>`, or null when the request has none. */
export function bearerOf(req: http.IncomingMessage): string | null {
  const auth = req.headers.authorization ?? '';
  return auth.startsWith('Bearer ') ? auth.slice('Bearer '.length).trim() : null;
}

/** Whether the request carries `Authorization: Bearer <token>` with this launch's token. */
export function hasBearerToken(req: http.IncomingMessage, token: string): boolean {
  return sameSecret(bearerOf(req), token);
}

/** Why a /v1 request's key is refused: 401 (missing, wrong or revoked), or 503 (the key file cannot be read). */
export interface KeyRefusal {
  status: 401 | 503;
  /** One line, never the key. */
  message: string;
  code: 'invalid_api_key' | 'api_key_unavailable';
}

/** Checks the Bearer secret of a /v1 request (null when it has none): null lets it in. */
export type ApiKeyCheck = (given: string | null) => KeyRefusal | null;

/** The standalone /v1 server's check: its one token. */
export function tokenCheck(token: string, hint = 'the access token that `hindsight serve` printed'): ApiKeyCheck {
  return (given) =>
    sameSecret(given, token)
      ? null
      : { status: 401, code: 'invalid_api_key', message: `${given === null ? 'missing' : 'wrong'} API key: send 'Authorization: Bearer <key>' with ${hint}` };
}

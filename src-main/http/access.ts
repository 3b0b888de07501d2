// Who may talk to Hindsight's HTTP servers (`serve`'s /api and /v1, and the standalone /v1
// server): loopback addresses only, and a random access token per launch, compared in
// constant time.
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

/** Whether the request carries `Authorization: Bearer <token>` with this launch's token. */
export function hasBearerToken(req: http.IncomingMessage, token: string): boolean {
  const auth = req.headers.authorization ?? '';
  return auth.startsWith('Bearer ') && sameSecret(auth.slice('Bearer '.length).trim(), token);
}

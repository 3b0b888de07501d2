// JSON over HTTP for `serve`'s /api and the OpenAI-compatible /v1: reading a request body
// within a size limit, and JSON replies. Each API keeps its own error shape; these helpers
// only carry it.
import type http from 'node:http';
import type net from 'node:net';

const MiB = 1024 * 1024;
/** How long a refused upload's connection stays open for the client to read the answer. */
const LINGER_MS = 2_000;

/** The body is over the limit; answer with `refuseOversizedBody`, which closes the connection. */
export class BodyTooLargeError extends Error {
  override name = 'BodyTooLargeError';
  constructor(readonly limit: number) {
    super(`The request body is larger than ${Math.round(limit / MiB)} MB.`);
  }
}

/** The request's media type, lower-cased, without parameters ('' when none). */
export function mediaType(req: http.IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * The request body as UTF-8 text. Over `limit` bytes it rejects with a BodyTooLargeError:
 * at once when Content-Length says so, else as soon as a chunked body passes the limit. The
 * rest is never kept: what still arrives is discarded until the connection closes.
 */
export function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const refuse = () => {
      req.removeListener('data', onData);
      chunks.length = 0;
      req.resume();
      reject(new BodyTooLargeError(limit));
    };
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return refuse();
      chunks.push(chunk);
    };
    if (Number(req.headers['content-length'] ?? 0) > limit) return refuse();
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(JSON.stringify(body));
}

export function sendText(res: http.ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(text + '\n');
}

/** An error answer in the caller's shape; a response already under way (a stream) can only be ended. */
export function sendJsonError(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) res.end();
  else sendJson(res, status, body);
}

/**
 * Answers 413 to a request whose body was left unread (BodyTooLargeError), then closes the
 * connection: `Connection: close` tells the client to stop sending, and the socket stays
 * open until the client has read the answer and hung up (or LINGER_MS).
 */
export function refuseOversizedBody(res: http.ServerResponse, body: unknown): void {
  const socket = res.socket;
  if (!res.headersSent) res.setHeader('Connection', 'close');
  if (socket) res.once('finish', () => lingerThenClose(socket));
  sendJsonError(res, 413, body);
}

/**
 * Node destroys a `Connection: close` socket as soon as the answer is written. Body bytes the
 * client sent meanwhile then make the kernel reset the connection, and a reset can drop the
 * answer before the client reads it ("connection reset", "empty reply"). So we only half-close
 * and keep discarding input until the client closes its side, as web servers' lingering close.
 */
function lingerThenClose(socket: net.Socket): void {
  socket.removeListener('finish', socket.destroy); // Node's destroy-on-write-finished
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('end', () => socket.destroy());
  socket.once('close', () => clearTimeout(timer));
  socket.resume();
}

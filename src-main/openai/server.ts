/**
 * The OpenAI-compatible endpoint on its own HTTP server, on loopback: for tests, for
 * benchmarks, and for anyone who wants the endpoint without the UI. `hindsight serve`
 * mounts the same handler (./handler.ts) under /v1 of its own server instead.
 *
 *     const server = await startOpenAiServer({ modelDir: 'resources/models/stories260K', port: 0 });
 *     // base URL server.baseUrl (http://127.0.0.1:PORT/v1), API key server.token
 *     await server.close();
 */
import http from 'node:http';
import { assertLoopbackHost, listenOnLoopback, newAccessToken, tokenCheck } from '../http/access.js';
import { sendJson } from '../http/json.js';
import type { Device } from '../model/ort-session.js';
import { createOpenAiHandler } from './handler.js';
import { errorBody } from './protocol.js';

export interface OpenAiServerOptions {
  modelDir: string | (() => string);
  /** A PEFT LoRA adapter folder to serve applied (merged; see served-model.ts). */
  adapterDir?: string | null;
  /** The API key clients must send; generated when omitted. */
  token?: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  device?: Device;
  log?: (line: string) => void;
}

export interface OpenAiServer {
  /** http://127.0.0.1:PORT/v1 — what an OpenAI client takes as its base URL. */
  baseUrl: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

export async function startOpenAiServer(options: OpenAiServerOptions): Promise<OpenAiServer> {
  const host = options.host ?? '127.0.0.1';
  assertLoopbackHost(host);
  const token = options.token ?? newAccessToken();
  const modelDir = typeof options.modelDir === 'string' ? () => options.modelDir as string : options.modelDir;
  const handler = createOpenAiHandler({ modelDir, adapterDir: () => options.adapterDir ?? null, device: options.device, log: options.log });
  const check = tokenCheck(token, "this server's token");
  const server = http.createServer((req, res) => {
    const pathname = (req.url ?? '/').split('?')[0]!;
    if (pathname === '/v1' || pathname.startsWith('/v1/')) return void handler.route(req, res, check);
    sendJson(res, 404, errorBody(`unknown path ${pathname}: the OpenAI-compatible API lives under /v1`, 'invalid_request_error', null, 'unknown_url'));
  });
  const port = await listenOnLoopback(server, host, options.port ?? 0);
  const urlHost = host === '::1' ? '[::1]' : host;
  return {
    baseUrl: `http://${urlHost}:${port}/v1`,
    port,
    token,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await handler.close();
    },
  };
}

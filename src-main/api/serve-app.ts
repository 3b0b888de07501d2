// `hindsight serve` as a function: the service over the HTTP transport, with the renderer
// built on demand. The CLI command, `npm start`'s fallback and the tests all start it here.
import fs from 'node:fs';
import path from 'node:path';
import { EventHub } from '../workspace/event-hub.js';
import { browserHost } from './host.js';
import { startHttpServer, type RunningServer } from './http-server.js';
import { openWorkspace as defaultOpenWorkspace } from './open-workspace.js';
import { ensureRendererBuilt, PROJECT_ROOT } from './renderer-build.js';
import { HindsightService, type OpenWorkspace } from './app-service.js';
import { createOpenAiHandler } from '../openai/handler.js';
import type { UpstreamTarget } from '../openai/upstream.js';
import { CaptureService, type CaptureWorkspace } from '../capture/capture-service.js';
import { sameSecret } from '../http/access.js';

export interface ServeOptions {
  dbPath: string;
  host?: string;
  port?: number;
  token?: string;
  /** Build the UI when missing or stale (default true); the API tests skip it. */
  buildRenderer?: boolean;
  openWorkspace?: OpenWorkspace<CaptureWorkspace>;
  log?: (line: string) => void;
  /** The model the OpenAI-compatible /v1 API serves; default: the settings' model folder (the demo model until changed). */
  openaiModelDir?: string;
  /** A PEFT LoRA adapter the /v1 API serves applied to that model (fed beside its weights). */
  openaiAdapterDir?: string;
  /** `serve --capture`: turns live capture on (saved in Settings, where the user can turn it off). */
  capture?: boolean;
  /** `serve --upstream URL`: proxy /v1/chat/completions there for this launch. */
  upstream?: UpstreamTarget;
  /** How long a /v1 request waits for a loading model before a 503 (default 60 s). */
  loadWaitMs?: number;
  /** The capture log's size at which settled sessions move to its archive (default 64 MiB, src-main/capture/log-rotation.ts). */
  captureRotateAtBytes?: number;
}

export interface ServeHandle extends RunningServer {
  service: HindsightService<CaptureWorkspace>;
  events: EventHub;
  capture: CaptureService;
}

export function appVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

/** Where the API key is, for the start-up line (made now on a first launch); never the key itself. */
function keyWhere(capture: CaptureService, log: (line: string) => void): string {
  try {
    return `the one in Settings → Live capture, kept in ${capture.keys.current().path}`;
  } catch (err) {
    log((err as Error).message);
    return 'none until its file is mended (see the line above)';
  }
}

export async function serveApp(options: ServeOptions): Promise<ServeHandle> {
  const log = options.log ?? (() => {});
  const rendererDir = options.buildRenderer === false ? path.join(PROJECT_ROOT, 'out', 'renderer') : await ensureRendererBuilt(log);
  const events = new EventHub();
  const openWorkspace: OpenWorkspace<CaptureWorkspace> = options.openWorkspace ?? defaultOpenWorkspace;
  const service = await HindsightService.create({
    dbPath: options.dbPath,
    resourcesDir: path.join(PROJECT_ROOT, 'resources'),
    version: appVersion(),
    transport: 'http',
    host: browserHost,
    events,
    openWorkspace,
  });
  // /v1: the open database's settings are asked per request, so a model folder changed in Settings is served next.
  const modelDir = () => options.openaiModelDir ?? service.settings.raw.defaultModelDir;
  if (options.capture && !service.settings.raw.captureEnabled) service.settings.update({ captureEnabled: true });
  let endpoint: string | null = null;
  const capture = new CaptureService({
    workspace: () => service.currentWorkspace,
    settings: () => service.settings,
    events,
    modelDir,
    baseAdapter: () => options.openaiAdapterDir ?? null,
    endpoint: () => endpoint,
    log,
    launchUpstream: options.upstream ?? null,
    rotateAtBytes: options.captureRotateAtBytes,
  });
  const openai = createOpenAiHandler({
    modelDir,
    // The background loop's latest adapter once it has trained one (hot swap), else --adapter's.
    adapterDir: () => capture.activeAdapter(),
    upstream: () => capture.upstream(),
    capture: capture.hook,
    feedback: (body) => capture.feedback(body),
    loadWaitMs: options.loadWaitMs,
    log,
  });
  capture.attachPreload(openai.preload);
  service.attachCapture(capture);
  const shutdown = async () => {
    await capture.close();
    await openai.close();
    service.close();
  };
  try {
    try {
      capture.ensure(); // replays the capture log and resumes the loop's queue
    } catch (err) {
      // The UI and the API still serve; capture requests will say what is wrong.
      log(`live capture cannot start: ${(err as Error).message}`);
    }
    // /v1 takes the stable API key of capture clients, or this launch's token (as the UI has it).
    const server = await startHttpServer({
      handlers: service, events, host: options.host, port: options.port, token: options.token, rendererDir,
      openai: (req, res, token) => openai.route(req, res, (given) => (sameSecret(given, token) ? null : capture.keys.check(given))),
    });
    endpoint = `${server.url}v1`;
    log(`OpenAI-compatible API: base URL ${server.url}v1, API key: ${keyWhere(capture, log)}`);
    if (service.settings.raw.captureEnabled) log(`live capture is ON: chats through ${endpoint} are recorded in ${capture.status().logPath}`);
    return {
      ...server,
      service,
      events,
      capture,
      close: async () => {
        await server.close();
        await shutdown();
      },
    };
  } catch (err) {
    await shutdown();
    throw err;
  }
}

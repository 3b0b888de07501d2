// `hindsight serve` as a function: the service over the HTTP transport, with the renderer
// built on demand. The CLI command, `npm start`'s fallback and the tests all start it here.
import fs from 'node:fs';
import path from 'node:path';
import { EventHub } from './events.js';
import { browserHost } from './host.js';
import { startHttpServer, type RunningServer } from './http-server.js';
import { openWorkspace as defaultOpenWorkspace } from './open-workspace.js';
import { ensureRendererBuilt, PROJECT_ROOT } from './renderer-build.js';
import { HindsightService, type OpenWorkspace } from './service.js';

export interface ServeOptions {
  dbPath: string;
  host?: string;
  port?: number;
  token?: string;
  /** Build the UI when missing or stale (default true); the API tests skip it. */
  buildRenderer?: boolean;
  openWorkspace?: OpenWorkspace;
  log?: (line: string) => void;
}

export interface ServeHandle extends RunningServer {
  service: HindsightService;
  events: EventHub;
}

export function appVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}

export async function serveApp(options: ServeOptions): Promise<ServeHandle> {
  const log = options.log ?? (() => {});
  const rendererDir = options.buildRenderer === false ? path.join(PROJECT_ROOT, 'out', 'renderer') : await ensureRendererBuilt(log);
  const events = new EventHub();
  const service = await HindsightService.create({
    dbPath: options.dbPath,
    resourcesDir: path.join(PROJECT_ROOT, 'resources'),
    version: appVersion(),
    transport: 'http',
    host: browserHost,
    events,
    openWorkspace: options.openWorkspace ?? defaultOpenWorkspace,
  });
  try {
    const server = await startHttpServer({ handlers: service, events, host: options.host, port: options.port, token: options.token, rendererDir });
    return {
      ...server,
      service,
      events,
      close: async () => {
        await server.close();
        service.close();
      },
    };
  } catch (err) {
    service.close();
    throw err;
  }
}

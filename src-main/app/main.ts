// The Electron main process: one window, the menu, the IPC binding of the API contract, and
// the security settings. This folder is the only place that imports `electron`; the service
// it binds is the same one `hindsight serve` exposes over HTTP.
//
// Security: the renderer runs sandboxed with context isolation and no Node; it is loaded from
// a privileged app:// scheme whose responses carry a strict CSP; navigation, new windows,
// <webview>s and permission requests are refused; every IPC call comes from our own page and
// is validated against the contract in main before the service sees it.
import { app, BrowserWindow, ipcMain, Menu, protocol, session, shell, type WebContents } from 'electron';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultDbPath } from '../store/db-location.js';
import { CONTENT_SECURITY_POLICY } from '../api/csp.js';
import { runCall } from '../api/errors.js';
import { EventHub } from '../workspace/event-hub.js';
import { openWorkspace } from '../api/open-workspace.js';
import { HindsightService } from '../api/app-service.js';
import { CALL_CHANNEL, EVENT_CHANNEL } from './channels.js';
import { electronHost } from './electron-host.js';
import { buildMenu } from './menu.js';
import { keepCudaFp32Exact } from '../model/cuda-env.js';

const OUT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RENDERER_DIR = path.join(OUT_DIR, 'renderer');
const PRELOAD = path.join(OUT_DIR, 'preload', 'index.cjs');
const APP_ORIGIN = 'app://hindsight';
/** Set by `electron-vite dev`: the renderer then comes from Vite's dev server, with HMR. */
const DEV_SERVER_URL = app.isPackaged ? undefined : process.env['ELECTRON_RENDERER_URL'];

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
};

// app:// must be registered before `ready` to count as a secure, standard origin.
protocol.registerSchemesAsPrivileged([{ scheme: 'app', privileges: { standard: true, secure: true, supportFetchAPI: true } }]);
app.enableSandbox();

let mainWindow: BrowserWindow | null = null;

function resourcesDir(): string {
  return app.isPackaged ? path.join(process.resourcesPath, 'resources') : path.join(app.getAppPath(), 'resources');
}

/** Serves the built renderer under app://hindsight/ with the CSP header; never outside it. */
function registerAppProtocol(): void {
  protocol.handle('app', async (request) => {
    const url = new URL(request.url);
    if (url.host !== 'hindsight') return new Response('Not found', { status: 404 });
    const root = path.resolve(RENDERER_DIR);
    let file = path.resolve(root, '.' + path.posix.normalize(decodeURIComponent(url.pathname)));
    if (!file.startsWith(root + path.sep)) return new Response('Not found', { status: 404 });
    if (!fs.existsSync(file) || fs.statSync(file).isDirectory()) file = path.join(root, 'index.html');
    const body = await fs.promises.readFile(file);
    return new Response(body, {
      headers: {
        'Content-Type': MIME[path.extname(file)] ?? 'application/octet-stream',
        'Content-Security-Policy': CONTENT_SECURITY_POLICY,
        'X-Content-Type-Options': 'nosniff',
      },
    });
  });
}

function isOwnPage(url: string | undefined): boolean {
  if (!url) return false;
  if (url.startsWith(APP_ORIGIN + '/')) return true;
  return DEV_SERVER_URL !== undefined && url.startsWith(new URL(DEV_SERVER_URL).origin + '/');
}

/** Locks down every web contents: no navigation away, no new windows, no webviews. */
function hardenContents(contents: WebContents): void {
  contents.on('will-navigate', (event, url) => {
    if (!isOwnPage(url)) event.preventDefault();
  });
  contents.on('will-redirect', (event, url) => {
    if (!isOwnPage(url)) event.preventDefault();
  });
  contents.on('will-attach-webview', (event) => event.preventDefault());
  contents.setWindowOpenHandler(({ url }) => {
    // Links to the web open in the user's browser, never inside the app.
    if (url.startsWith('https://')) void shell.openExternal(url);
    return { action: 'deny' };
  });
}

function hardenSession(): void {
  session.defaultSession.setPermissionRequestHandler((_contents, _permission, callback) => callback(false));
  session.defaultSession.setPermissionCheckHandler(() => false);
  if (DEV_SERVER_URL) {
    // Vite's dev server injects styles inline and talks over a websocket for HMR; the built
    // app keeps the strict policy.
    const devPolicy = `default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self' ws:`;
    session.defaultSession.webRequest.onHeadersReceived((details, callback) => {
      callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [devPolicy] } });
    });
  }
}

function createWindow(): BrowserWindow {
  const win = new BrowserWindow({
    width: 1360,
    height: 880,
    minWidth: 960,
    minHeight: 600,
    title: 'Hindsight',
    backgroundColor: '#f6f4ef',
    show: false,
    webPreferences: {
      preload: PRELOAD,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      navigateOnDragDrop: false,
      spellcheck: true,
    },
  });
  win.once('ready-to-show', () => win.show());
  void win.loadURL(DEV_SERVER_URL ?? `${APP_ORIGIN}/index.html`);
  return win;
}

function bindApi(service: HindsightService, events: EventHub): void {
  ipcMain.handle(CALL_CHANNEL, async (event, name: unknown, input: unknown) => {
    // Only our own top-level page may call: not a frame, not another origin.
    if (!isOwnPage(event.senderFrame?.url) || event.senderFrame !== event.sender.mainFrame) {
      return { ok: false, error: { kind: 'unauthorized', message: 'API calls are accepted from the Hindsight window only.' } };
    }
    return runCall(service, name, input);
  });
  events.subscribe((name, payload) => {
    if (mainWindow && !mainWindow.isDestroyed()) mainWindow.webContents.send(EVENT_CHANNEL, name, payload);
  });
}

async function start(): Promise<void> {
  keepCudaFp32Exact();
  if (!app.requestSingleInstanceLock()) {
    // Two processes saving one database would overwrite each other's changes.
    app.quit();
    return;
  }
  app.on('second-instance', () => {
    if (mainWindow?.isMinimized()) mainWindow.restore();
    mainWindow?.focus();
  });
  app.on('web-contents-created', (_e, contents) => hardenContents(contents));
  await app.whenReady();
  registerAppProtocol();
  hardenSession();

  const events = new EventHub();
  const dbPath = process.env['HINDSIGHT_DB'] ?? defaultDbPath();
  const service = await HindsightService.create({
    dbPath,
    resourcesDir: resourcesDir(),
    version: app.getVersion(),
    transport: 'electron',
    host: electronHost(() => mainWindow),
    events,
    openWorkspace,
  });
  bindApi(service, events);
  Menu.setApplicationMenu(
    buildMenu({
      send: (command) => events.emit('app.command', { command }),
      dbPath: () => service.currentDbPath,
      version: app.getVersion(),
    }),
  );
  mainWindow = createWindow();
  mainWindow.on('closed', () => (mainWindow = null));

  app.on('activate', () => {
    if (!mainWindow) {
      mainWindow = createWindow();
      mainWindow.on('closed', () => (mainWindow = null));
    }
  });
  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit();
  });
  app.on('will-quit', () => service.close());
}

start().catch((err) => {
  process.stderr.write(`hindsight: could not start: ${(err as Error).stack ?? err}\n`);
  app.exit(1);
});

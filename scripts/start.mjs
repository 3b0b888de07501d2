#!/usr/bin/env node
// `npm start`: launches the Hindsight desktop app.
//
// 1. If the Electron binary is installed, build and launch the app (electron-vite preview;
//    `npm start -- --dev` runs electron-vite dev with hot reload instead).
// 2. If it is not (`.npmrc` has ignore-scripts, so `npm ci` never downloads it), try once to
//    fetch it (node node_modules/electron/install.js, 60 s limit).
// 3. Where that fails (no network, as on the machines that build this project) or there is no
//    display, say so plainly and start `hindsight serve` on the default database instead:
//    the same UI in a browser, on 127.0.0.1 with a per-launch token. The URL is printed and,
//    where a desktop is available, opened.
//
// Options: --dev, --browser (skip Electron), and for the browser fallback --db PATH, --port P.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ELECTRON_DIR = path.join(ROOT, 'node_modules', 'electron');
const args = process.argv.slice(2);
const wantsDev = args.includes('--dev');
const wantsBrowser = args.includes('--browser') || process.env.HINDSIGHT_BROWSER === '1';
const serveArgs = args.filter((a) => a !== '--dev' && a !== '--browser');

function say(line) {
  process.stderr.write(`hindsight: ${line}\n`);
}

/** The binary electron's own index.js would run, or null when it was never downloaded. */
function electronBinary() {
  const pathFile = path.join(ELECTRON_DIR, 'path.txt');
  if (!fs.existsSync(pathFile)) return null;
  const binary = path.join(ELECTRON_DIR, 'dist', fs.readFileSync(pathFile, 'utf8').trim());
  return fs.existsSync(binary) ? binary : null;
}

function tryFetchElectron() {
  say('the Electron binary is not installed (npm ci skips install scripts on purpose); trying to download it once…');
  const result = spawnSync(process.execPath, [path.join(ELECTRON_DIR, 'install.js')], {
    cwd: ELECTRON_DIR,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ELECTRON_SKIP_BINARY_DOWNLOAD: '' },
  });
  if (result.status === 0 && electronBinary()) return { ok: true };
  const why =
    result.error?.code === 'ETIMEDOUT'
      ? 'the download timed out after 60 s'
      : ((result.stderr || result.stdout || result.error?.message || '').trim().split('\n').find((l) => /error|ENOTFOUND|EAI_AGAIN|ECONN|getaddrinfo/i.test(l)) ??
        `install.js exited with ${result.status}`);
  return { ok: false, why: why.trim().slice(0, 300) };
}

function hasDisplay() {
  if (process.platform !== 'linux') return true;
  return Boolean(process.env.DISPLAY || process.env.WAYLAND_DISPLAY);
}

function launchElectron() {
  const cli = path.join(ROOT, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js');
  say(wantsDev ? 'starting the desktop app in development mode (electron-vite dev)…' : 'building and starting the desktop app (electron-vite preview)…');
  const child = spawn(process.execPath, [cli, wantsDev ? 'dev' : 'preview'], { cwd: ROOT, stdio: 'inherit' });
  child.on('exit', (code) => process.exit(code ?? 0));
}

function onPath(command) {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir && fs.existsSync(path.join(dir, command)));
}

/** Asks the desktop to open the URL; false where there is no desktop or no opener. */
function openInBrowser(url) {
  if (!hasDisplay()) return false;
  const opener = process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['cmd', ['/c', 'start', '', url]] : ['xdg-open', [url]];
  if (process.platform === 'linux' && !onPath('xdg-open')) return false;
  try {
    const child = spawn(opener[0], opener[1], { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
    return true;
  } catch {
    return false;
  }
}

function launchServe() {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'hindsight.mjs'), 'serve', '--json', ...serveArgs], {
    cwd: ROOT,
    stdio: ['inherit', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout });
  lines.once('line', (line) => {
    let info;
    try {
      info = JSON.parse(line);
    } catch {
      process.stdout.write(line + '\n');
      return;
    }
    const opened = openInBrowser(info.loginUrl);
    process.stdout.write(
      `\nHindsight is running in your browser, on database ${info.db}\n` +
        `Open this URL (it carries this launch's access token)${opened ? '; your desktop was asked to open it' : ''}:\n\n  ${info.loginUrl}\n\nPress Ctrl+C to stop.\n`,
    );
  });
  const forward = (signal) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  child.on('exit', (code) => process.exit(code ?? 0));
}

if (wantsBrowser) {
  launchServe();
} else if (!hasDisplay()) {
  say('no display found ($DISPLAY and $WAYLAND_DISPLAY are empty), so the desktop window cannot open; starting the browser UI (hindsight serve) instead.');
  launchServe();
} else if (electronBinary()) {
  launchElectron();
} else {
  const fetched = tryFetchElectron();
  if (fetched.ok) {
    launchElectron();
  } else {
    say(`could not download Electron: ${fetched.why}`);
    say('starting the same app in your browser instead (hindsight serve, loopback only, per-launch token).');
    launchServe();
  }
}

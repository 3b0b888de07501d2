// What every browser test needs: a real `hindsight serve` child process on a temporary
// database and a random port, Debian's Chromium driven by playwright-core, the API called
// from the test (to check what the UI claims), and screenshots.
//
// Screenshots go to test-output/screenshots on ordinary runs, so CI never touches tracked
// files; `HINDSIGHT_SCREENSHOTS=docs/screenshots` refreshes the committed ones that the
// README shows.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { chromium, type Browser, type Page } from 'playwright-core';

export const ROOT = path.resolve(import.meta.dirname, '..', '..');
export const CHROMIUM = process.env.HINDSIGHT_CHROMIUM ?? '/usr/bin/chromium';
export const SHOTS = path.resolve(ROOT, process.env.HINDSIGHT_SCREENSHOTS ?? path.join('test-output', 'screenshots'));
export const haveChromium = fs.existsSync(CHROMIUM);

/** Says once, on stderr, why a browser suite is skipped. */
export function reportMissingChromium(suite: string): void {
  if (!haveChromium) {
    process.stderr.write(`[e2e] ${suite} SKIPPED: ${CHROMIUM} not found; install Debian's chromium (apt-get install chromium) to run the browser tests.\n`);
  }
}

export interface ServeHandle {
  /** The base URL, ending in '/'. */
  url: string;
  /** The URL with the per-launch token, which the page trades for a cookie. */
  loginUrl: string;
  token: string;
  /** Calls the API as a script would, with the token. Throws the API's message on an error. */
  api<T>(name: string, input?: unknown): Promise<T>;
  /**
   * Stops serve (SIGTERM: the app closing; SIGKILL: a crash) and waits for it to exit, so its
   * database is closed before the folder goes.
   */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

/** Starts `hindsight serve --port 0 --json` on `dbPath` and reads the URL it prints. */
export async function startServe(dbPath: string): Promise<ServeHandle> {
  const child: ChildProcess = spawn(process.execPath, [path.join(ROOT, 'bin', 'hindsight.mjs'), 'serve', '--db', dbPath, '--port', '0', '--json'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const lines = readline.createInterface({ input: child.stdout! });
  const started = await new Promise<{ url: string; loginUrl: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start in time:\n${stderr}`)), 90_000);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${stderr}`)));
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve(JSON.parse(line) as { url: string; loginUrl: string });
    });
  });
  const token = new URL(started.loginUrl).searchParams.get('token')!;
  return {
    ...started,
    token,
    async api<T>(name: string, input: unknown = {}): Promise<T> {
      const res = await fetch(`${started.url}api/${name}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
        body: JSON.stringify(input),
      });
      const body = (await res.json()) as { ok: boolean; value: T; error?: { message: string } };
      if (!body.ok) throw new Error(body.error!.message);
      return body.value;
    },
    stop: (signal = 'SIGTERM') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill(signal);
      }),
  };
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** Collects the page's console errors and uncaught exceptions, for a final "no errors" check. */
export function collectPageErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  return errors;
}

export async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  // Toasts are dismissed on click; clear them so they do not cover the screen.
  await page.evaluate(() => document.querySelectorAll<HTMLElement>('.toast').forEach((t) => t.click()));
  await page.waitForTimeout(150); // let charts and layout settle
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

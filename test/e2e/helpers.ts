// What every browser test needs: a real `hindsight serve` child process on a temporary
// database and a random port, Debian's Chromium driven by playwright-core, the API called
// from the test (to check what the UI claims), and screenshots.
//
// Screenshots go to test-output/screenshots on ordinary runs, so CI never touches tracked
// files; `HINDSIGHT_SCREENSHOTS=docs/screenshots` refreshes the committed ones that the
// README shows.
//
// Waiting: every wait in the browser tests is for a state (an element, an attribute, a text
// the app sets when the work is done, an API answer, a process's output or exit), never for
// a length of time. How long a state takes to come depends on the machine's load: on 2
// shared cores with busy loops beside them, an import or a page load can take many times
// its usual time. So the deadlines below only catch hangs (test/helpers/deadlines.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import { afterEach } from 'vitest';
import { STATE_TIMEOUT_MS } from '../helpers/deadlines.js';

export { STATE_TIMEOUT_MS, TEST_TIMEOUT_MS } from '../helpers/deadlines.js';

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

/**
 * Starts `hindsight serve --port 0 --json` on `dbPath` and reads the URL it prints; `env` replaces
 * the environment (a fake HOME); `port` asks for that port instead (a restart where the tab was).
 */
/** The serve processes of this test file still running, for the report on a failed test. */
const running = new Set<{ stderr: () => string; api: ServeHandle['api'] }>();

/**
 * A failed browser test says what the serve processes behind it were doing: the end of each
 * one's stderr and its training runs as trainStatus lists them (status, phase, last step, error).
 * A wait that times out names only the element it waited for; this says why it never came.
 */
afterEach(async ({ task }) => {
  if (task.result?.state !== 'fail') return;
  for (const serve of running) {
    const runs = await serve.api<{ runs: unknown[] }>('trainStatus').then((s) => JSON.stringify(s.runs, null, 1), (err: Error) => `trainStatus failed: ${err.message}`);
    process.stderr.write(`[e2e] after the failed test "${task.name}", serve's stderr ended with:\n${serve.stderr().slice(-4000) || '(nothing)'}\nand its training runs were: ${runs}\n`);
  }
});

export async function startServe(dbPath: string, options: { env?: NodeJS.ProcessEnv; port?: number } = {}): Promise<ServeHandle> {
  const child: ChildProcess = spawn(process.execPath, [path.join(ROOT, 'bin', 'hindsight.mjs'), 'serve', '--db', dbPath, '--port', String(options.port ?? 0), '--json'], {
    cwd: ROOT,
    ...(options.env ? { env: options.env } : {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const lines = readline.createInterface({ input: child.stdout! });
  const started = await new Promise<{ url: string; loginUrl: string }>((resolve, reject) => {
    // serve either prints its URL or exits; the timer only catches a hang.
    const timer = setTimeout(() => reject(new Error(`serve printed no URL in ${STATE_TIMEOUT_MS / 1000} s (a hang):\n${stderr}`)), STATE_TIMEOUT_MS);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${stderr}`)));
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve(JSON.parse(line) as { url: string; loginUrl: string });
    });
  });
  const token = new URL(started.loginUrl).searchParams.get('token')!;
  const api = async <T>(name: string, input: unknown = {}): Promise<T> => {
    const res = await fetch(`${started.url}api/${name}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify(input),
    });
    const body = (await res.json()) as { ok: boolean; value: T; error?: { message: string } };
    if (!body.ok) throw new Error(body.error!.message);
    return body.value;
  };
  const entry = { stderr: () => stderr, api };
  running.add(entry);
  child.once('exit', () => running.delete(entry));
  return {
    ...started,
    token,
    api,
    stop: (signal = 'SIGTERM') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        // A SIGTERM'd serve saves and stops a training run at a checkpoint first, which takes
        // as long as the load makes it; SIGKILL only if it hangs.
        const timer = setTimeout(() => child.kill('SIGKILL'), STATE_TIMEOUT_MS);
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

/**
 * A page in a fresh browser context whose Playwright timeouts (actions, waits, navigation)
 * are STATE_TIMEOUT_MS, five minutes. Every browser test opens its pages here, so no wait
 * falls back to Playwright's default of 30 s: that default is a guess at "slow", and it fired
 * under load (an import of a 5,000-turn session took 44 s on 2 cores with two busy loops
 * beside it) although nothing was wrong. Five minutes only catches a hang, and then fails with
 * Playwright's message naming what it waited for.
 */
export async function openPage(browser: Browser, options: BrowserContextOptions = {}): Promise<Page> {
  const context = await browser.newContext(options);
  context.setDefaultTimeout(STATE_TIMEOUT_MS);
  context.setDefaultNavigationTimeout(STATE_TIMEOUT_MS);
  return context.newPage();
}

/** A browser suite's view of the app: Chromium, one page on serve, what the page logs as errors, its toasts. */
export interface BrowserApp {
  browser: Browser;
  page: Page;
  pageErrors: string[];
  toasts: ToastRecord;
}

/**
 * Launches Chromium and opens a page ({@link openPage}'s deadlines) of the given size, recording
 * its errors and toasts from the first load on; with `login` (the default) it then loads serve's
 * login URL, which trades the per-launch token for the session cookie.
 */
export async function openApp(serve: ServeHandle, options: { viewport: { width: number; height: number }; login?: boolean }): Promise<BrowserApp> {
  const browser = await launchBrowser();
  const page = await openPage(browser, { viewport: options.viewport });
  const pageErrors = collectPageErrors(page);
  const toasts = await recordToasts(page);
  if (options.login !== false) await page.goto(serve.loginUrl);
  return { browser, page, pageErrors, toasts };
}

/**
 * The end of a browser suite: the browser closed, serve stopped (so its database is closed),
 * then the suite's folder removed. Each may be missing when the suite's start failed part way.
 */
export async function closeApp(browser: Browser | undefined, serve: ServeHandle | undefined, dir: string | undefined): Promise<void> {
  await browser?.close();
  await serve?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * Resolves once layout and paint have caught up with the DOM: web fonts loaded and two
 * animation frames drawn (Chart.js and the virtual list resize on a frame). It counts frames,
 * not milliseconds, so a slow machine just takes longer.
 */
export async function settle(page: Page): Promise<void> {
  await page.evaluate(async () => {
    await document.fonts.ready;
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  });
}

/** Types a message into the Chat page's box and sends it with Enter. */
export async function sayInChat(page: Page, text: string): Promise<void> {
  await page.locator('[data-testid=chat-input]').fill(text);
  await page.locator('[data-testid=chat-input]').press('Enter');
}

/**
 * Resolves once `selector`'s box and the scroll position of `scroller` stayed the same for
 * `frames` animation frames in a row: a jump in the virtual list has finished placing its
 * target as estimated heights became measurements. Frames, not milliseconds, again.
 */
export async function waitForStillLayout(page: Page, selector: string, scroller: string, frames = 10): Promise<void> {
  await page.evaluate(
    ({ selector, scroller, frames }) =>
      new Promise<void>((resolve) => {
        let last = '';
        let still = 0;
        const check = () => {
          const box = document.querySelector(selector)?.getBoundingClientRect();
          const now = `${box?.top}:${box?.bottom}:${document.querySelector(scroller)?.scrollTop}`;
          still = box && now === last ? still + 1 : 0;
          last = now;
          if (still >= frames) resolve();
          else requestAnimationFrame(check);
        };
        requestAnimationFrame(check);
      }),
    { selector, scroller, frames },
  );
}

/**
 * Records the text of every toast the page shows, from page load on, so a test can wait for
 * "this toast appeared" after an action. A toast leaves by itself after a few seconds; on a
 * loaded machine a polling wait could miss it, or find the toast of an earlier action still
 * standing. The record is kept by a MutationObserver in the page (it sees every added toast)
 * and survives reloads (an init script).
 */
export interface ToastRecord {
  /** Waits for the first toast containing `text` after the last one this returned; returns its text. */
  next(text: string): Promise<string>;
  /** After a reload the page's record starts again. */
  reset(): void;
}

export async function recordToasts(page: Page): Promise<ToastRecord> {
  await page.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { __toasts: string[] }).__toasts = seen;
    new MutationObserver((records) => {
      for (const r of records)
        r.addedNodes.forEach((node) => {
          if (node instanceof HTMLElement && node.classList.contains('toast')) seen.push(node.textContent?.trim() ?? '');
        });
    }).observe(document, { childList: true, subtree: true });
  });
  let consumed = 0;
  return {
    async next(text: string): Promise<string> {
      const handle = await page.waitForFunction(
        ({ text, from }) => {
          const seen = (window as unknown as { __toasts?: string[] }).__toasts ?? [];
          const i = seen.findIndex((t, k) => k >= from && t.includes(text));
          return i < 0 ? null : { index: i, text: seen[i]! };
        },
        { text, from: consumed },
      );
      const found = (await handle.jsonValue())!;
      consumed = found.index + 1;
      return found.text;
    },
    reset() {
      consumed = 0;
    },
  };
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
  await settle(page); // charts and layout catch up with the DOM
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

// Settings and the API key in a browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve` (issue 34 items 6 and 12): one Save for the whole page, with "Unsaved
// changes" until it is pressed; the capture card's API key shown on request, copied, and
// regenerated (the old key refused by /v1 at once); then serve is restarted on the same port with
// the tab open: the app shows the "restarted" banner, a reload shows the page that explains, and
// pasting the new link there signs the tab in again, where the key is still the same.
// Screenshots at 1400×900: settings.png, settings-capture.png, session-expired-banner.png,
// session-expired-page.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CaptureKeyView } from '../../src-shared/capture-api.js';
import type { Settings } from '../../src-shared/contract.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('settings-key.test.ts');

let dir: string;
let dbPath: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let toasts: ToastRecord;
let pageErrors: string[] = [];

const keyFile = () => `${fs.realpathSync(dbPath)}.api-key`;
const models = (key: string) => fetch(`${serve.url}v1/models`, { headers: { Authorization: `Bearer ${key}` } });

describe.skipIf(!haveChromium)('Settings and the API key, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-key-'));
    dbPath = path.join(dir, 'key.db');
    serve = await startServe(dbPath);
    ({ browser, page, pageErrors, toasts } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: serve.url.replace(/\/$/, '') });
    await page.locator('[data-nav=settings]').click();
    await page.locator('[data-testid=capture-key][data-shown=false]').waitFor();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  }, TEST_TIMEOUT_MS);

  it('saves judge, training and capture settings with one button, saying when changes are unsaved', async () => {
    expect(await page.locator('[data-action=save-settings]').count()).toBe(1);
    expect(await page.locator('[data-action=save-capture]').count()).toBe(0);
    await page.locator('[data-testid=settings-unsaved]').waitFor({ state: 'detached' });
    await page.locator('input[name=backend][value=local]').check();
    await page.fill('label:has-text("Votes") input', '5');
    await page.locator('[data-field=capture-auto-judge]').check();
    // The background runs' Precision, as the Training page's: the CPU's default (fp32) first; off for a quantised base.
    const precision = page.locator('[data-field=capture-train-precision]');
    expect(await precision.locator('option').first().textContent()).toBe('default (fp32)');
    await page.locator('[data-field=capture-train-quantize]').selectOption('int4');
    expect(await precision.isDisabled()).toBe(true);
    await page.locator('[data-field=capture-train-quantize]').selectOption('none');
    await precision.selectOption('fp16');
    await page.locator('[data-testid=settings-unsaved]').waitFor();
    await page.locator('[data-action=save-settings]').click();
    await toasts.next('Settings saved');
    await page.locator('[data-testid=settings-unsaved]').waitFor({ state: 'detached' });
    const saved = await serve.api<Settings>('getSettings');
    expect(saved.judge).toMatchObject({ backend: 'local', votes: 5 });
    expect(saved.capture).toMatchObject({ autoJudge: true, trainQuantize: 'none', trainPrecision: 'fp16' });
    // Back to the defaults, for the screenshot.
    await page.locator('input[name=backend][value=heuristic]').check();
    await page.locator('[data-field=capture-auto-judge]').uncheck();
    await precision.selectOption({ index: 0 });
    await page.locator('[data-action=save-settings]').click();
    await toasts.next('Settings saved');
    expect((await serve.api<Settings>('getSettings')).capture.trainPrecision).toBeNull();
    await page.evaluate(() => document.querySelector('.content')!.scrollTo(0, 0));
    await shot(page, 'settings');
  });

  it('shows the API key on request, copies it, and regenerates it: the old key is refused at once', async () => {
    const key = fs.readFileSync(keyFile(), 'utf8').trim();
    if (process.platform !== 'win32') expect(fs.statSync(keyFile()).mode & 0o777).toBe(0o600);
    const shown = page.locator('[data-testid=capture-key]');
    expect(await shown.textContent()).toContain(`hsk-…${key.slice(-4)}`);
    expect(await shown.textContent()).not.toContain(key);
    expect(await page.locator('[data-testid=capture-key-path]').textContent()).toBe(keyFile());
    await page.locator('[data-action=show-key]').click();
    await page.locator('[data-testid=capture-key][data-shown=true]', { hasText: key }).waitFor();
    await page.locator('[data-action=show-key]').click();
    await page.locator('[data-testid=capture-key][data-shown=false]').waitFor();
    await page.locator('[data-action=copy-key]').click();
    await page.locator('[data-action=copy-key]', { hasText: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
    expect((await models(key)).status).toBe(200);
    await page.locator('[data-testid=capture-connect]').scrollIntoViewIfNeeded();
    await shot(page, 'settings-capture');

    page.once('dialog', (d) => void d.accept());
    await page.locator('[data-action=regenerate-key]').click();
    await toasts.next('New API key made');
    const fresh = fs.readFileSync(keyFile(), 'utf8').trim();
    expect(fresh).not.toBe(key);
    await page.locator('[data-testid=capture-key][data-shown=true]', { hasText: fresh }).waitFor();
    const refused = await models(key);
    expect(refused.status).toBe(401);
    expect((await refused.json()).error.message).toMatch(/^this API key was revoked/);
    expect((await models(fresh)).status).toBe(200);
  });

  it('after a restart the tab shows the banner, a reload explains, the pasted link signs in again, and the key is the same', async () => {
    const key = fs.readFileSync(keyFile(), 'utf8').trim();
    const port = Number(new URL(serve.url).port);
    const oldToken = serve.token;
    await serve.stop();
    serve = await startServe(dbPath, { port });
    expect(serve.token).not.toBe(oldToken);
    // The page's event stream is refused by the new launch: the app finds out why and says so.
    const banner = page.locator('[data-testid=session-banner]');
    await banner.waitFor();
    expect(await banner.textContent()).toContain('Hindsight was restarted: this tab is signed out.');
    await page.evaluate(() => document.querySelector('.content')!.scrollTo(0, 0));
    await shot(page, 'session-expired-banner');
    // A call made now fails with the same words, not "Unauthorized".
    const answer = await page.evaluate(async () => (await fetch('api/stats', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' })).json());
    expect(answer.error.message).toMatch(/^Hindsight was restarted, so this tab’s access has expired/);

    await page.locator('[data-action=session-reload]').click();
    await page.locator('main[data-signin=expired] h1', { hasText: 'Hindsight was restarted' }).waitFor();
    await shot(page, 'session-expired-page');
    await page.fill('input[name=token]', serve.loginUrl);
    await page.locator('button[type=submit]', { hasText: 'Sign in' }).click();
    await page.locator('[data-nav=settings]').click();
    await page.locator('[data-testid=capture-key]', { hasText: `hsk-…${key.slice(-4)}` }).waitFor();
    expect(page.url()).not.toContain('token=');
    expect(await page.locator('[data-testid=session-banner]').count()).toBe(0);
    expect((await models(key)).status).toBe(200);
  });

  it('logged no errors in the page but those of the restart (the stream retried while serve was down, the refused calls)', () => {
    expect(pageErrors.filter((e) => !/status of 401|ERR_CONNECTION_REFUSED/.test(e))).toEqual([]);
  });
});

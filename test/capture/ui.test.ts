// Live capture in the browser (Debian's Chromium, playwright-core) against a real `hindsight
// serve`: capture is off and no indicator shows; turning it on in Settings shows the
// "Recording chats" indicator; a chat through /v1 appears in Sessions without a reload; the
// session's page deletes it (confirmed), from the list and the capture log.
// Screenshot: capture-settings.png (see test/e2e/helpers.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from '../e2e/helpers.js';
import { chat } from './helpers.js';

reportMissingChromium('capture/ui.test.ts');

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let errors: string[];

beforeAll(async () => {
  if (!haveChromium) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-capture-ui-'));
  serve = await startServe(path.join(dir, 'ui.db'));
  ({ browser, page, pageErrors: errors } = await openApp(serve, { viewport: { width: 1280, height: 860 } }));
}, TEST_TIMEOUT_MS);
afterAll(() => closeApp(browser, serve, dir), TEST_TIMEOUT_MS);

describe.skipIf(!haveChromium)('live capture in the UI', { timeout: TEST_TIMEOUT_MS }, () => {
  it('off by default; on from Settings with a visible indicator; a captured chat appears live and can be deleted', async () => {
    await page.click('[data-nav="settings"]');
    await page.waitForSelector('[data-testid="capture-panel"]');
    expect(await page.locator('[data-testid="capture-indicator"]').count()).toBe(0);
    expect(await page.isChecked('[data-field="capture-enabled"]')).toBe(false);

    await page.check('[data-field="capture-enabled"]');
    await page.click('[data-action="save-settings"]');
    await page.waitForSelector('[data-testid="capture-indicator"]');
    expect(await page.textContent('[data-testid="capture-indicator"]')).toContain('Recording chats');
    expect(await page.textContent('[data-testid="capture-endpoint"]')).toBe(`${serve.url}v1`);
    expect((await serve.api<{ enabled: boolean }>('captureStatus')).enabled).toBe(true);

    await page.click('[data-nav="sessions"]');
    const first = [{ role: 'user', content: 'Tell me a story about a kite.' }];
    const r1 = await chat(`${serve.url}v1`, serve.token, first, { headers: { 'X-Session-Id': 'ui-demo' } });
    await chat(`${serve.url}v1`, serve.token, [...first, { role: 'assistant', content: r1.content }, { role: 'user', content: 'Perfect, thanks!' }], {
      headers: { 'X-Session-Id': 'ui-demo' },
    });
    // No reload: the workspace event refreshes the list.
    await page.waitForSelector('text=Tell me a story about a kite.');
    await page.click('[data-nav="settings"]');
    await page.waitForSelector('[data-testid="capture-status"]');
    await page.waitForFunction(() => document.querySelector('[data-testid="capture-status"]')?.textContent?.includes('2 exchanges in 1 sessions'));
    await page.locator('[data-testid="capture-panel"]').scrollIntoViewIfNeeded();
    await shot(page, 'capture-settings');

    await page.goto(`${serve.url}#/session/${encodeURIComponent('capture:ui-demo')}`);
    await page.waitForSelector('[data-action="delete-session"]');
    page.once('dialog', (d) => void d.accept());
    await page.click('[data-action="delete-session"]');
    await page.waitForFunction(() => !document.body.textContent?.includes('Tell me a story about a kite.'));
    const status = await serve.api<{ logPath: string; sessions: number }>('captureStatus');
    expect(status.sessions).toBe(0);
    expect(fs.readFileSync(status.logPath, 'utf8')).not.toContain('a kite');
    expect(errors).toEqual([]);
  });
});

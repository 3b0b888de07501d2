// Importing and the Sessions list in a browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve` (issue 34 items 5 and 7): several files uploaded at once list every file's
// counts and the total; a folder of exports imports by path and by folder upload, each file's
// result listed (a stray JSON skipped, a link refused); new sessions are marked until opened;
// titles and dates for Hugging Face and ShareGPT sessions; sortable columns; bulk labelling,
// holding out and deleting a selection; and the app at 800 px wide (sidebar collapsed, the
// table's rows visible and clickable, no page wider than the window). Screenshots: import,
// sessions, import-narrow, sessions-narrow. Every wait is on a state of the page, never on time.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionDetail, SessionSummary, SplitView, Stats } from '../../src-shared/contract.js';
import { closeApp, haveChromium, openApp, openPage, reportMissingChromium, ROOT, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('sessions.test.ts');

const CHATGPT = path.join(ROOT, 'test', 'fixtures', 'chatgpt-branches.json');

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let toasts: ToastRecord;

const api = <T>(name: string, input: unknown = {}) => serve.api<T>(name, input);
const hfLine = (question: string, answer: string, reaction: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ messages: [{ role: 'user', content: question }, { role: 'assistant', content: answer }, { role: 'user', content: reaction }], ...extra });
const sharegpt = (question: string, answer: string, reaction: string) => ({
  conversations: [{ from: 'human', value: question }, { from: 'gpt', value: answer }, { from: 'human', value: reaction }],
});

function writeFixtures() {
  const hf = path.join(dir, 'plants.jsonl');
  fs.writeFileSync(hf, [
    hfLine('How often should I water a fiddle leaf fig?', 'About once a week, when the top inch is dry.', 'Thanks, that helps!', { created_at: '2024-04-02T09:00:00Z' }),
    hfLine('Why are my basil leaves turning yellow?', 'Probably overwatering.', 'No, the soil is dry.', { created_at: '2024-05-20T09:00:00Z' }),
  ].join('\n') + '\n');
  const share = path.join(dir, 'travel.json');
  fs.writeFileSync(share, JSON.stringify([
    sharegpt('Plan a weekend in Lyon for two', 'Day one: the old town…', 'Great, exactly what I wanted.'),
    sharegpt('zebra crossing rules in Germany?', 'Pedestrians have priority.', 'Thanks!'),
  ]));
  // A folder of exports: files at two depths, a stray JSON that is no export, and a link.
  const folder = path.join(dir, 'exports');
  fs.mkdirSync(path.join(folder, 'older'), { recursive: true });
  fs.writeFileSync(path.join(folder, 'cooking.jsonl'), hfLine('How long do I boil an egg?', 'Nine minutes for hard.', 'Perfect.') + '\n');
  fs.writeFileSync(path.join(folder, 'older', 'music.json'), JSON.stringify([sharegpt('Suggest jazz albums for a beginner', 'Kind of Blue.', 'Loved it, more please.')]));
  fs.writeFileSync(path.join(folder, 'package.json'), JSON.stringify({ name: 'not-a-chat', version: '1.0.0' }));
  fs.symlinkSync(path.join(folder, 'cooking.jsonl'), path.join(folder, 'shortcut.jsonl'));
  // A second folder, uploaded through the folder picker.
  const upload = path.join(dir, 'phone-exports');
  fs.mkdirSync(upload);
  fs.writeFileSync(path.join(upload, 'bikes.jsonl'), hfLine('Which tyre pressure for a road bike?', 'Around 80 psi.', 'That seems high.') + '\n');
  fs.writeFileSync(path.join(upload, 'notes.txt'), 'not an export');
  return { files: [hf, share, CHATGPT], folder, upload };
}

/** The import panel once it has finished the import labelled `label`. */
const importDone = (label: string) => page.locator(`.import-panel[data-state=imported][data-source="${label}"]`).waitFor();
const rowTitles = () => page.locator('.session-row .session-link').allTextContents();
const sortedBy = (key: string, order: 'asc' | 'desc') => page.locator(`.sessions-table[data-sort="${key}:${order}"]`).waitFor();
/** Waits until the list shows `n` rows (it reloads on each change event). */
const rowsAre = (n: number) => page.waitForFunction((n) => document.querySelectorAll('.session-row').length === n, n);

describe.skipIf(!haveChromium)('importing and the Sessions list, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  let fixtures: ReturnType<typeof writeFixtures>;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-sessions-'));
    fixtures = writeFixtures();
    serve = await startServe(path.join(dir, 'sessions.db'));
    ({ browser, page, pageErrors, toasts } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  }, TEST_TIMEOUT_MS);

  it('imports several files at once and lists every file’s counts with the total', async () => {
    await page.getByRole('heading', { name: 'Welcome to Hindsight' }).waitFor();
    await page.setInputFiles('[data-testid=import-file]', fixtures.files);
    // The first file lands, the Sessions page takes over, and its import drawer shows the batch.
    await importDone('3 files');
    const lines = page.locator('[data-testid=import-files] li');
    expect(await lines.count()).toBe(3);
    expect(await lines.evaluateAll((els) => els.map((e) => e.getAttribute('data-outcome')))).toEqual(['imported', 'imported', 'imported']);
    const texts = await lines.allTextContents();
    expect(texts[0]).toMatch(/plants\.jsonl\s*2 new · 0 updated · 0 unchanged · 2 samples/);
    expect(texts[1]).toMatch(/travel\.json\s*2 new/);
    expect(texts[2]).toMatch(/chatgpt-branches\.json\s*1 new/);
    const stats = await api<Stats>('stats');
    expect(stats.sessions).toBe(5);
    const total = (await page.locator('[data-testid=import-total]').textContent())!.replace(/\s+/g, ' ');
    expect(total).toContain(`5 new · 0 updated · 0 unchanged sessions · ${stats.turns} turns · ${stats.samples} samples from 3 files`);
    // Every new session is marked; titles come from the first user message, dates where the file has one.
    await rowsAre(5);
    expect(await page.locator('[data-testid=new-badge]').count()).toBe(5);
    const titles = await rowTitles();
    expect(titles).toContain('Plan a weekend in Lyon for two');
    expect(titles).toContain('How often should I water a fiddle leaf fig?');
    expect(titles).not.toContain('Untitled conversation');
    const lyon = page.locator('.session-row', { hasText: 'Plan a weekend in Lyon' });
    expect((await lyon.locator('.col-created').textContent())!.trim()).toBe('');
    expect(await page.locator('.session-row .col-created', { hasText: 'Invalid' }).count()).toBe(0);
    expect(await page.locator('.session-row', { hasText: 'fiddle leaf' }).locator('.col-created').textContent()).toMatch(/2024/);
    await shot(page, 'import');
  });

  it('imports a folder of exports by path: each file listed, a stray JSON skipped, a link refused', async () => {
    await page.locator('[aria-label="Path to import"]').fill(fixtures.folder);
    await page.getByRole('button', { name: 'Import path' }).click();
    await importDone(fixtures.folder);
    const outcomes = Object.fromEntries(
      await page.locator('[data-testid=import-files] li').evaluateAll((els) => els.map((e) => [e.getAttribute('title')!.split('/').pop()!, e.getAttribute('data-outcome')!])),
    );
    expect(outcomes).toEqual({ 'cooking.jsonl': 'imported', 'music.json': 'imported', 'package.json': 'skipped', 'shortcut.jsonl': 'refused' });
    expect(await page.locator('[data-outcome=refused]').textContent()).toContain('symbolic link');
    expect(await page.locator('[data-outcome=skipped]').textContent()).toContain('not a supported chat export');
    expect((await api<Stats>('stats')).sessions).toBe(7);
  });

  it('imports a folder through the folder picker, leaving other files alone', async () => {
    await page.setInputFiles('[data-testid=import-folder]', fixtures.upload);
    await importDone('phone-exports');
    expect(await page.locator('[data-testid=import-files] li').count()).toBe(0); // one file, imported: the total says it
    expect(await page.locator('.import-panel .warnings summary').textContent()).toBe('1 warning');
    expect((await api<Stats>('stats')).sessions).toBe(8);
    await page.locator('.session-row', { hasText: 'tyre pressure' }).waitFor();
  });

  it('keeps the “new” mark until the session is opened', async () => {
    const row = page.locator('.session-row', { hasText: 'boil an egg' });
    await row.locator('[data-testid=new-badge]').waitFor();
    await row.locator('.session-link').click();
    await page.locator('.annotator[data-state=ready]').waitFor();
    await page.locator('[data-nav=sessions]').click();
    await page.locator('.session-row', { hasText: 'tyre pressure' }).waitFor();
    expect(await page.locator('.session-row', { hasText: 'boil an egg' }).locator('[data-testid=new-badge]').count()).toBe(0);
    expect(await page.locator('[data-testid=new-badge]').count()).toBe(7);
  });

  it('sorts by title, by samples and by date, both ways', async () => {
    await page.locator('[data-sort=title]').click();
    await sortedBy('title', 'asc');
    const asc = await rowTitles();
    expect(asc).toEqual([...asc].sort((a, b) => (a.toLowerCase() < b.toLowerCase() ? -1 : a.toLowerCase() > b.toLowerCase() ? 1 : 0)));
    expect(asc[asc.length - 1]).toBe('zebra crossing rules in Germany?');
    await page.locator('[data-sort=title]').click();
    await sortedBy('title', 'desc');
    expect(await rowTitles()).toEqual([...asc].reverse());
    await page.locator('[data-sort=samples]').click();
    await sortedBy('samples', 'desc');
    const samples = (await page.locator('.session-row .col-samples').allTextContents()).map(Number);
    expect(samples).toEqual([...samples].sort((a, b) => b - a));
    expect(await page.locator('th[aria-sort=descending]').textContent()).toContain('Samples');
    await page.locator('[data-sort=created]').click();
    await sortedBy('created', 'desc');
    const dated = await page.locator('.session-row .col-created').allTextContents();
    // Undated sessions come last.
    expect(dated.findIndex((d) => d.trim() === '')).toBeGreaterThan(dated.findLastIndex((d) => d.trim() !== ''));
  });

  it('labels the samples of selected sessions, holds them out and puts them back', async () => {
    const ids = await page.locator('.session-row').evaluateAll((rows) => rows.slice(0, 2).map((r) => r.getAttribute('data-session')!));
    for (const id of ids) await page.locator(`.session-row[data-session="${id}"] [data-testid=select-session]`).check();
    await page.locator('[data-testid=bulk-bar]', { hasText: '2 sessions selected' }).waitFor();
    await page.locator('[data-bulk=neg]').click();
    await toasts.next('Labelled −1');
    for (const id of ids) {
      const detail = await api<SessionDetail>('getSession', { id });
      for (const s of detail.samples) expect(s.label).toMatchObject({ reward: -1, source: 'manual' });
    }
    await page.locator('[data-bulk=hold-out]').click();
    await toasts.next('Held out 2 sessions');
    const held = await api<SplitView>('split');
    for (const id of ids) expect(held.listed.find((l) => l.id === id)).toMatchObject({ heldOut: true, why: 'user' });
    await page.locator(`.session-row[data-session="${ids[0]}"] [data-action=toggle-held-out][aria-checked=true]`).waitFor();
    await page.locator('[data-bulk=put-back]').click();
    await toasts.next('Put 2 sessions back');
    await page.locator(`.session-row[data-session="${ids[0]}"] [data-action=toggle-held-out][aria-checked=false]`).waitFor();
    await page.locator('.import-drawer').evaluate((d) => ((d as HTMLDetailsElement).open = false));
    await shot(page, 'sessions');
    // Select every session shown, then none.
    await page.locator('[data-testid=select-all]').check();
    await page.locator('[data-testid=bulk-bar]', { hasText: '8 sessions selected' }).waitFor();
    await page.locator('[data-bulk=deselect]').click();
    await page.locator('[data-testid=bulk-bar]').waitFor({ state: 'detached' });
  });

  it('deletes selected sessions after a confirmation', async () => {
    const before = await api<Stats>('stats');
    const row = page.locator('.session-row', { hasText: 'zebra crossing' });
    const id = (await row.getAttribute('data-session'))!;
    await row.locator('[data-testid=select-session]').check();
    await page.locator('[data-bulk=delete]').click();
    await page.locator('[data-testid=bulk-confirm]', { hasText: 'cannot be undone' }).waitFor();
    await page.locator('[data-bulk=cancel-delete]').click();
    expect((await api<Stats>('stats')).sessions).toBe(before.sessions);
    await page.locator('[data-bulk=delete]').click();
    await page.locator('[data-bulk=confirm-delete]').click();
    await toasts.next('Deleted 1 session');
    await rowsAre(before.sessions - 1);
    expect((await api<Stats>('stats')).sessions).toBe(before.sessions - 1);
    const left = await api<{ sessions: SessionSummary[] }>('listSessions', {});
    expect(left.sessions.map((s) => s.id)).not.toContain(id);
  });

  it('is usable at 800 px wide: sidebar collapsed, the table’s rows visible and clickable, no page wider than the window', async () => {
    const narrow = await openPage(browser, { viewport: { width: 800, height: 900 } });
    const errors: string[] = [];
    narrow.on('pageerror', (e) => errors.push(e.message));
    await narrow.goto(serve.loginUrl);
    await narrow.locator('.session-row').first().waitFor();
    const sidebar = (await narrow.locator('.sidebar').boundingBox())!;
    expect(sidebar.width).toBeLessThan(80);
    expect(await narrow.locator('.sidebar .nav-label').first().isVisible()).toBe(false);
    expect(await narrow.getByRole('link', { name: 'Training' }).isVisible()).toBe(true);
    // The table fits its box (or scrolls inside it); every row's title and held-out switch are on screen.
    const box = (await narrow.locator('[data-testid=sessions-table-box]').boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(800);
    for (const cell of ['.session-link', '[data-action=toggle-held-out]']) {
      const b = (await narrow.locator(`.session-row ${cell}`).first().boundingBox())!;
      expect(b.x + b.width).toBeLessThanOrEqual(800);
    }
    await shot(narrow, 'sessions-narrow');
    await narrow.locator('.import-drawer > summary').click();
    await narrow.locator('.import-panel [data-action=import-folder]').waitFor();
    await shot(narrow, 'import-narrow');
    await narrow.locator('.session-row .session-link').first().click();
    await narrow.locator('.annotator[data-state=ready]').waitFor();
    // Every page: nothing wider than the window.
    for (const name of ['sessions', 'review', 'checks', 'training', 'rollouts', 'evaluate', 'chat', 'export', 'settings']) {
      await narrow.locator(`[data-nav=${name}]`).click();
      await narrow.locator(`[data-nav=${name}].active`).waitFor();
      await narrow.locator('.content .page, .content .annotator').first().waitFor();
      const overflow = await narrow.evaluate(() => {
        const content = document.querySelector('.content')!;
        return { page: document.documentElement.scrollWidth, content: content.scrollWidth - content.clientWidth };
      });
      expect({ name, ...overflow }).toEqual({ name, page: 800, content: 0 });
    }
    expect(errors).toEqual([]);
    await narrow.context().close();
  });

  it('logged no errors in the page', () => {
    expect(pageErrors.filter((e) => !/status of 422/.test(e))).toEqual([]);
  });
});

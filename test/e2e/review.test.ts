// Review mode in a browser (Debian's Chromium, playwright-core) against a real `hindsight serve`
// (docs/design.md §Review, §Composite score): an LLM judge in composite mode (a scripted
// OpenAI-compatible server in this process) labels five replies; the Review page lists the
// uncertain ones, most uncertain first — the one the heuristic disagrees with, then the split
// votes — and the keyboard alone confirms or corrects each (1/2/3) and moves on (j/k skip),
// even when a re-read of the queue answers after a correction. Every wait is on a state of the
// page, never on time.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReviewItem } from '../../src-shared/views.js';
import { scriptedServer, type ScriptedServer } from '../judge/helpers.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, type ServeHandle } from './helpers.js';

reportMissingChromium('review.test.ts');

/** The composite judge's answers per reaction, vote by vote. */
const SCRIPT: [string, string[]][] = [
  ['No, I said a cat, not a dog.', ['correctness: 80 | A fine story.\ninstruction: 75 | A story was asked for.\ntone: 90 | Warm.\nlength: 80 | Short.\n\\boxed{78}', '\\boxed{82}', '\\boxed{75}']],
  ['Perfect, thanks!', ['tone: 90 | Friendly.\n\\boxed{90}', '\\boxed{40}', '\\boxed{85}']],
  ['Hmm, okay.', ['\\boxed{55}', '\\boxed{50}', '\\boxed{60}']],
  ['That is wrong, use a bird instead.', ['\\boxed{20}', '\\boxed{10}', '\\boxed{25}']],
  ['Thanks, that is exactly right.', ['\\boxed{88}', 'no idea', '\\boxed{91}']],
];

let dir: string;
let serve: ServeHandle;
let judge: ScriptedServer;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let queue: ReviewItem[];

const itemSelector = (i: ReviewItem) => `[data-testid=review-item][data-session="${i.sample.sessionId}"][data-turn="${i.sample.responseTurn}"]`;

describe.skipIf(!haveChromium)('Review mode, in a browser', () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-review-'));
    const lines = SCRIPT.map(([reaction], i) =>
      JSON.stringify({ messages: [{ role: 'user', content: `Tell me story number ${i}.` }, { role: 'assistant', content: `Once upon a time there was a dog number ${i}.` }, { role: 'user', content: reaction }] }),
    );
    fs.writeFileSync(path.join(dir, 'stories.jsonl'), lines.join('\n') + '\n');
    const asked = new Map<string, number>();
    judge = await scriptedServer((body) => {
      const prompt = String(body.messages[1].content);
      const [reaction, answers] = SCRIPT.find(([r]) => prompt.includes(r))!;
      const n = asked.get(reaction) ?? 0;
      asked.set(reaction, n + 1);
      return { content: answers[n % answers.length] };
    });
    serve = await startServe(path.join(dir, 'review.db'));
    await serve.api('importFiles', { paths: [path.join(dir, 'stories.jsonl')] });
    await serve.api('updateSettings', { judgeBackend: 'openai', openaiBaseUrl: judge.baseUrl, openaiModel: 'scorer', judgeComposite: true, compositePos: 70, compositeNeg: 30 });
    await serve.api('judgeRun', { backend: 'openai', hints: false, votes: 3 });
    queue = (await serve.api<{ items: ReviewItem[] }>('reviewQueue', {})).items;
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1360, height: 900 } }));
  });

  afterAll(async () => {
    await judge?.close();
    await closeApp(browser, serve, dir);
  });

  it('orders the queue: the heuristic disagreeing first, then split votes; sure labels stay out', () => {
    expect(queue[0]).toMatchObject({ reasons: ['disagree'], heuristicReward: -1, sample: { feedback: 'No, I said a cat, not a dog.', label: { reward: 1, composite: { score: 78 } } } });
    // Two 2-to-1 splits of equal uncertainty follow in the database's session order.
    expect(queue.slice(1).map((i) => i.sample.feedback).sort()).toEqual(['Perfect, thanks!', 'Thanks, that is exactly right.']);
    for (const item of queue.slice(1)) expect(item.reasons).toEqual(['split']);
  });

  it('shows the most uncertain label with its reasons and composite score', async () => {
    await page.locator('[data-nav=review]').click();
    await page.locator(itemSelector(queue[0]!)).waitFor();
    expect(await page.locator('[data-testid=review-reasons]').textContent()).toContain('the heuristic says −1');
    expect(await page.locator('[data-testid=composite-score]').textContent()).toMatch(/78\s*\/100\s*≥ 70/);
    expect(await page.locator('[data-testid=review-position]').textContent()).toBe('1 of 3 to review');
    await shot(page, 'review');
  });

  it('2 corrects and moves on; a re-read of the queue that answers late does not bring the label back', async () => {
    // Any change re-reads the queue. This read is answered by the server at once, before the
    // correction, but reaches the page only after it: what a loaded machine can do.
    let deliver: (() => Promise<void>) | undefined;
    let answered!: () => void;
    const staleReadAnswered = new Promise<void>((resolve) => (answered = resolve));
    await page.route('**/api/reviewQueue', async (route) => {
      const response = await route.fetch();
      deliver = () => route.fulfill({ response });
      answered();
    }, { times: 1 });
    await serve.api('updateSettings', { compositePos: 70 });
    await staleReadAnswered;
    const freshRead = page.waitForResponse((r) => r.url().endsWith('/api/reviewQueue'));
    await page.keyboard.press('2');
    await page.locator(itemSelector(queue[1]!)).waitFor();
    await freshRead; // the re-read the correction itself causes, done before the stale one lands
    const delivered = page.waitForResponse((r) => r.url().endsWith('/api/reviewQueue'));
    await deliver!();
    await delivered;
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
    expect(await page.locator(itemSelector(queue[0]!)).count()).toBe(0);
    await page.locator(itemSelector(queue[1]!)).waitFor();
    expect(await page.locator('[data-testid=review-position]').textContent()).toBe('1 of 2 to review');
  });

  it('keyboard only: j/k skip, 1 confirms, until nothing is left', async () => {
    await page.keyboard.press('j');
    await page.locator(itemSelector(queue[2]!)).waitFor();
    await page.keyboard.press('k');
    await page.locator(itemSelector(queue[1]!)).waitFor();
    await page.keyboard.press('1');
    await page.locator(itemSelector(queue[2]!)).waitFor();
    await page.keyboard.press('1');
    await page.locator('[data-testid=review-empty]').waitFor();

    const after = await serve.api<{ total: number }>('reviewQueue', {});
    expect(after.total).toBe(0);
    const labels = await Promise.all(queue.map((i) => serve.api<{ samples: { responseTurn: number; label: any }[] }>('getSession', { id: i.sample.sessionId })));
    expect(labels.map((d) => d.samples[0]!.label).map((l) => [l.source, l.reward, l.reviewedAt !== null])).toEqual([
      ['manual', -1, true],
      ['manual', 1, true],
      ['manual', 1, true],
    ]);
  });

  it('Checks says no label is left unreviewed and uncertain', async () => {
    await page.locator('[data-nav=checks]').click();
    const card = page.locator('[data-testid=unreviewed-card]');
    await card.waitFor();
    expect(await card.textContent()).toMatch(/^\s*0\s*labels still unreviewed and uncertain/);
    // All five cards in one row: none left alone on a second.
    const tops = await page.locator('.cards > .card').evaluateAll((cards) => cards.map((c) => c.getBoundingClientRect().top));
    expect(tops).toHaveLength(5);
    expect(new Set(tops).size).toBe(1);
  });

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});

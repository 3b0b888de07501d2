// The Chat page in a browser (Debian's Chromium, playwright-core) against a real `hindsight
// serve` with the demo model: a tiny adapter is trained through the API (as the Evaluate test
// does), then the page sends a message to the base and that adapter at once and both columns
// stream and finish; Stop ends both mid-reply; Clear starts over; the capture line follows the
// setting; an adapter folder that went missing is a toast. A system prompt goes with every turn;
// each reply shows its tokens, tokens per second and finish reason; every chat is saved, listed,
// reopened after a reload with its replies and figures, and deleted. Screenshot: chat.png (1400×900).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatState, SavedChat, SavedChatSummary } from '../../src-shared/chat-api.js';
import { waitUntil } from '../helpers/deadlines.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, ROOT, sayInChat, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('chat.test.ts');

const MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');
const STORIES = [
  ['Tell me a story about a cat.', 'Tom had a little cat. The cat played with a red ball and was happy.', 'Lovely, thank you!'],
  ['Tell me a story about a dog.', 'qxzv kwjb fpqx zvkw jbfp.', 'That makes no sense.'],
  ['Tell me a story about a bird.', 'A little bird sang in the tree. Lily smiled and sang too.', 'Perfect, thanks!'],
  ['Tell me a story about a fish.', 'fpqx jbfp qxzv kwjb.', 'That is gibberish.'],
];

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let toasts: ToastRecord;
let pageErrors: string[] = [];
let adapterDir: string;

const column = (side: 'base' | 'adapter') => page.locator(`[data-testid=chat-column-${side}]`);
const chip = (side: 'base' | 'adapter') => column(side).locator('[data-testid=chat-side-status]');

async function setField(testId: string, value: string): Promise<void> {
  await page.locator(`[data-testid=${testId}]`).fill(value);
}

const say = (text: string) => sayInChat(page, text);

/** Waits until both columns' status chips read `status` and the back end agrees; returns its state. */
async function bothEnd(status: 'done' | 'stopped'): Promise<ChatState> {
  for (const side of ['base', 'adapter'] as const) await chip(side).filter({ hasText: status }).waitFor();
  return serve.api<ChatState>('chatStatus');
}

async function clear(): Promise<void> {
  await page.locator('[data-testid=chat-clear]').click();
  await page.locator('[data-testid=chat-column-base] .msg').first().waitFor({ state: 'detached' });
}

describe.skipIf(!haveChromium)('the Chat page, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-chat-'));
    const lines = STORIES.map(([ask, reply, reaction]) => ({ messages: [{ role: 'user', content: ask }, { role: 'assistant', content: reply }, { role: 'user', content: reaction }] }));
    fs.writeFileSync(path.join(dir, 'stories.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    serve = await startServe(path.join(dir, 'chat.db'));
    await serve.api('importFiles', { paths: [path.join(dir, 'stories.jsonl')] });
    const { sessions } = await serve.api<{ sessions: { id: string }[] }>('listSessions', {});
    for (const s of sessions) {
      const { turns } = await serve.api<{ turns: { role: string; text: string }[] }>('getSession', { id: s.id });
      const liked = turns.some((t) => /Lovely|Perfect/.test(t.text));
      await serve.api('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: liked ? 1 : -1 } });
    }
    await serve.api('setHeldOut', { sessionIds: sessions.map((s) => s.id), heldOut: false });
    adapterDir = path.join(dir, 'kind-run');
    const { runId } = await serve.api<{ runId: string }>('trainStart', {
      modelDir: MODEL, outDir: adapterDir, method: 'rl', steps: 2, batchSize: 2, lr: 5e-2, optimizer: 'adamw',
      loraR: 4, loraAlpha: 8, targets: ['q', 'v'], device: 'cpu', seed: 1, checkpointEvery: 0,
    });
    const run = await waitUntil('the adapter to be trained', async () => {
      const state = await serve.api<{ runs: { runId: string; status: string; error: string | null }[] }>('trainStatus');
      const r = state.runs.find((x) => x.runId === runId);
      return r && r.status !== 'running' ? r : null;
    });
    expect(run.error).toBeNull();
    expect(run.status).toBe('finished');
    ({ browser, page, pageErrors, toasts } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
    await page.locator('[data-nav=chat]').click();
    await page.locator('[data-testid=chat-adapter]').waitFor();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('preselects the configured model and the trained adapter, and says the chat is not recorded', async () => {
    await page.waitForFunction((dir) => (document.querySelector('[data-testid=chat-adapter]') as HTMLSelectElement).selectedOptions[0]?.textContent === dir, 'kind-run');
    expect(await page.locator('[data-testid=chat-model]').inputValue()).toBe(MODEL);
    expect(await column('base').locator('h2').textContent()).toBe('Base');
    expect(await column('adapter').locator('h2').textContent()).toBe('Adapter (kind-run)');
    await page.locator('[data-testid=chat-capture]', { hasText: 'Not recorded: live capture is off' }).waitFor();
    // Turned on, the line says so at once; turned off again, it goes back.
    await serve.api('updateSettings', { captureEnabled: true });
    await page.locator('[data-testid=chat-capture][data-captured=true]', { hasText: 'Recorded: live capture is on' }).waitFor();
    await serve.api('updateSettings', { captureEnabled: false });
    await page.locator('[data-testid=chat-capture][data-captured=false]').waitFor();
  });

  it('sends one message to both sides; both stream and finish with text', async () => {
    // Every text a column's live reply shows, in order, as the page draws it.
    await page.evaluate(() => {
      const seen: Record<string, { status: string; text: string }[]> = { base: [], adapter: [] };
      (window as unknown as { __chatSeen: typeof seen }).__chatSeen = seen;
      new MutationObserver(() => {
        for (const side of ['base', 'adapter']) {
          const live = document.querySelector(`[data-testid=chat-column-${side}] [data-testid=chat-live]`);
          if (live) seen[side]!.push({ status: live.getAttribute('data-status') ?? '', text: live.textContent ?? '' });
        }
      }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await setField('chat-max-tokens', '300');
    await setField('chat-seed', '11');
    await say('Tell me a story about a cat.');
    const state = await bothEnd('done');
    expect(state.seed).toBe(11);
    const seen = await page.evaluate(() => (window as unknown as { __chatSeen: Record<string, { status: string; text: string }[]> }).__chatSeen);
    for (const side of state.sides) {
      const reply = (await column(side.side).locator('[data-testid=chat-reply]').last().textContent())!;
      expect(reply.trim().length).toBeGreaterThan(0);
      expect(reply).toBe(side.text);
      // Streamed: the column showed the reply part-way, a prefix of what it became.
      expect(seen[side.side]!.some((s) => s.status === 'generating' && s.text.length > 0 && s.text.length < reply.length && reply.startsWith(s.text))).toBe(true);
    }
    expect(state.sides[0]!.text).not.toBe(state.sides[1]!.text);
    expect(state.captured).toBe(false);
    await clear();
    // The page empties its columns at once; the back end's end of the chat follows.
    await waitUntil('the chat to end in the back end', async () => (await serve.api<ChatState>('chatStatus')).state === 'idle');
  });

  it('Stop ends both replies mid-stream and keeps what was written', async () => {
    // Pressed by the page itself as soon as either reply shows text: hundreds of tokens remain.
    await page.evaluate(() => {
      const observer = new MutationObserver(() => {
        const lives = Array.from(document.querySelectorAll('[data-testid=chat-live]'));
        const stop = document.querySelector<HTMLButtonElement>('[data-testid=chat-stop]');
        if (stop && lives.some((l) => (l.textContent ?? '').trim().length > 0)) {
          observer.disconnect();
          stop.click();
        }
      });
      observer.observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    await setField('chat-max-tokens', '480');
    await say('Tell me a long story about a dog.');
    const state = await bothEnd('stopped');
    expect(state.state).toBe('stopped');
    for (const side of state.sides) expect(side.tokens ?? 0).toBeLessThan(440);
    const written = state.sides.filter((s) => s.text.length > 0);
    expect(written.length).toBeGreaterThan(0);
    for (const side of written) expect(await column(side.side).locator('[data-testid=chat-reply]').last().textContent()).toBe(`${side.text} (stopped)`);
    await clear();
  });

  it('holds a short conversation in both columns with a system prompt; each reply shows its figures (screenshot)', async () => {
    await setField('chat-max-tokens', '64');
    await setField('chat-seed', '3');
    await setField('chat-system', 'You tell short stories about animals.');
    await say('Tell me a story about a cat.');
    await bothEnd('done');
    await say('What did the cat do next?');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=chat-column-adapter] [data-testid=chat-reply]').length === 2 && document.querySelectorAll('[data-testid=chat-column-base] [data-testid=chat-reply]').length === 2);
    const state = await bothEnd('done');
    expect(await column('base').locator('.msg.user').count()).toBe(2);
    // Under each reply: its tokens, tokens per second, first token and finish reason, as the back end
    // measured them, and how much of the model's context the chat now takes (the demo model: 512).
    for (const side of state.sides) {
      const stats = (await column(side.side).locator('[data-testid=chat-reply-stats]').last().textContent())!.trim();
      expect(stats).toMatch(/^\d+ tokens? · [\d.]+ tok\/s · first token [\d.]+ s · (stop: the reply ended|length: reached Max tokens) · context \d+ of 512 tokens$/);
      expect(side.context).toEqual({ used: expect.any(Number), limit: 512 });
      expect(stats).toContain(`context ${side.context!.used} of 512 tokens`);
      expect(stats.startsWith(`${side.tokens} token`)).toBe(true);
      expect(stats).toContain(side.finishReason === 'length' ? 'length: reached Max tokens' : 'stop: the reply ended');
    }
    // Saved after each turn, with the system prompt: the list shows it, newest first.
    const saved = await serve.api<SavedChatSummary[]>('chatList');
    expect(saved[0]).toMatchObject({ id: state.chatId, title: 'Tell me a story about a cat.', turns: 2, adapter: 'kind-run' });
    expect((await serve.api<SavedChat>('chatOpen', { id: state.chatId })).systemPrompt).toBe('You tell short stories about animals.');
    await page.locator(`[data-testid=saved-chat][data-chat-id="${state.chatId}"].on`).waitFor();
    await page.locator('[data-testid=chat-input]').fill('And where did they go?');
    await shot(page, 'chat');
    await page.locator('[data-testid=chat-input]').fill('');
  });

  it('reopens a saved chat after a reload, with its replies, figures and system prompt; deletes one', async () => {
    const [latest] = await serve.api<SavedChatSummary[]>('chatList');
    const chat = await serve.api<SavedChat>('chatOpen', { id: latest!.id });
    await page.reload();
    await page.locator('[data-nav=chat]').click();
    await clear();
    await page.locator(`[data-testid=saved-chat][data-chat-id="${chat.id}"] .open`).click();
    await page.locator(`[data-testid=saved-chat][data-chat-id="${chat.id}"].on`).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=chat-column-base] [data-testid=chat-reply]').length === 2);
    const replies = await column('base').locator('[data-testid=chat-reply]').allTextContents();
    expect(replies).toEqual(chat.chatTurns.map((t) => t.replies.base!.text));
    expect(await column('adapter').locator('[data-testid=chat-reply]').allTextContents()).toEqual(chat.chatTurns.map((t) => t.replies.adapter!.text));
    expect(await column('base').locator('[data-testid=chat-reply-stats]').first().textContent()).toContain(`${chat.chatTurns[0]!.replies.base!.tokens} token`);
    expect(await page.locator('[data-testid=chat-system]').inputValue()).toBe('You tell short stories about animals.');
    // Deleting asks first; the list and the database lose it, and the open chat starts over.
    page.once('dialog', (d) => void d.accept());
    await page.locator(`[data-testid=saved-chat][data-chat-id="${chat.id}"] [data-action=delete-chat]`).click();
    await page.locator(`[data-testid=saved-chat][data-chat-id="${chat.id}"]`).waitFor({ state: 'detached' });
    expect((await serve.api<SavedChatSummary[]>('chatList')).some((c) => c.id === chat.id)).toBe(false);
    await page.locator('[data-testid=chat-column-base] .msg').first().waitFor({ state: 'detached' });
    await setField('chat-system', '');
  });

  it('an adapter folder that went missing is a toast, and nothing is sent', async () => {
    fs.renameSync(adapterDir, `${adapterDir}-moved`);
    const before = await column('adapter').locator('.msg').count();
    await say('Are you still there?');
    expect(await toasts.next('does not exist (moved or deleted?)')).toMatch(/^The adapter folder .*kind-run does not exist/);
    expect(await column('adapter').locator('.msg').count()).toBe(before);
    expect(await page.locator('[data-testid=chat-input]').inputValue()).toBe('Are you still there?');
  });

  it('logged no errors in the page but the refused call', () => {
    expect(pageErrors.filter((e) => !/status of 422/.test(e))).toEqual([]);
  });
});

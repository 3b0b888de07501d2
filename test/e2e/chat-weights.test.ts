// The Chat page on a machine whose memory does not hold the model in fp32 (HINDSIGHT_MEMORY_BUDGET
// set between the demo model's fp32 and int8 estimates, as a 16 GB laptop is for an 8B): the
// reply still comes, from int8 weights, and the page says which form answered and why.
// Screenshot: chat-weights.png (1400×900). Then a model of 65,536 positions where the memory holds
// a chat of 8,192 tokens: the page says how long a chat fits, and refuses a longer one in one line.
// Screenshot: chat-context.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatState } from '../../src-shared/chat-api.js';
import { estimateInferenceMemory } from '../../src-shared/inference-memory.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, ROOT, sayInChat, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('chat-weights.test.ts');

const MODEL = path.join(ROOT, 'resources', 'models', 'stories260K');

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;

describe.skipIf(!haveChromium)('the Chat page where fp32 does not fit', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-chat-weights-'));
    const shape = modelShape(MODEL);
    const [fp32, int8] = (['none', 'int8'] as const).map((quantize) => estimateInferenceMemory(shape, { quantize }).total);
    serve = await startServe(path.join(dir, 'chat.db'), { env: { ...process.env, HINDSIGHT_MEMORY_BUDGET: String(Math.floor((fp32! + int8!) / 2)) } });
    ({ browser, page } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
    await page.locator('[data-nav=chat]').click();
    await page.locator('[data-testid=chat-input]').waitFor();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('answers from int8 weights and says why (screenshot)', async () => {
    await page.locator('[data-testid=chat-max-tokens]').fill('40');
    await sayInChat(page, 'Tell me a story about a cat.');
    await page.locator('[data-testid=chat-column-base] [data-testid=chat-side-status]').filter({ hasText: 'done' }).waitFor();
    const state = await serve.api<ChatState>('chatStatus');
    expect(state.sides.map((s) => s.status)).toEqual(['done']);
    expect(state.sides[0]!.text.trim().length).toBeGreaterThan(0);
    const note = page.locator('[data-testid=chat-weights]');
    await note.waitFor();
    expect(await note.textContent()).toBe(state.weightsNote);
    expect(state.weightsNote).toMatch(/^int8 weights: fp32 would need about .* \(HINDSIGHT_MEMORY_BUDGET\)$/);
    await shot(page, 'chat-weights');
  });
});

describe.skipIf(!haveChromium)('the Chat page where a long chat does not fit', { timeout: TEST_TIMEOUT_MS }, () => {
  let toasts: ToastRecord;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-chat-context-'));
    const model = writeTinyModel(path.join(dir, 'long-context'), { family: 'qwen3', numLayers: 2, maxPositions: 65536 }).dir;
    const budget = Math.ceil(estimateInferenceMemory(modelShape(model), { quantize: 'none', contextTokens: 8192 }).total);
    serve = await startServe(path.join(dir, 'chat.db'), { env: { ...process.env, HINDSIGHT_MEMORY_BUDGET: String(budget) } });
    await serve.api('updateSettings', { defaultModelDir: model });
    ({ browser, page, toasts } = await openApp(serve, { viewport: { width: 1400, height: 900 } }));
    await page.locator('[data-nav=chat]').click();
    await page.locator('[data-testid=chat-input]').waitFor();
    // The page fills the model field from the settings once it has read them.
    await page.waitForFunction((dir) => (document.querySelector('[data-testid=chat-model]') as HTMLInputElement | null)?.value === dir, model);
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('says how long a chat fits, and refuses a longer message in one line (screenshot)', async () => {
    await page.locator('[data-testid=chat-max-tokens]').fill('8');
    await sayInChat(page, 'Hello there.');
    await page.locator('[data-testid=chat-column-base] [data-testid=chat-side-status]').filter({ hasText: 'done' }).waitFor();
    const line = page.locator('[data-testid=chat-context]');
    await line.waitFor();
    expect(await line.textContent()).toMatch(/^Answers chats up to 8,192 tokens of the model's 65,536: a longer chat's cache would not fit; this machine has .* \(HINDSIGHT_MEMORY_BUDGET\)$/);
    expect(await page.locator('[data-testid=chat-weights]').count()).toBe(0);
    await shot(page, 'chat-context');
    // The tiny tokenizer reads each "x" as a token: 9,000 of them are past the 8,192.
    await sayInChat(page, 'x'.repeat(9000));
    expect(await toasts.next('no longer fits')).toBe("Base: This conversation no longer fits the 8192 tokens this machine's memory holds for it: press Clear to start a new chat.");
  });
});

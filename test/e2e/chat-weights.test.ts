// The Chat page on a machine whose memory does not hold the model in fp32 (HINDSIGHT_MEMORY_BUDGET
// set between the demo model's fp32 and int8 estimates, as a 16 GB laptop is for an 8B): the
// reply still comes, from int8 weights, and the page says which form answered and why.
// Screenshot: chat-weights.png (1400×900).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatState } from '../../src-shared/chat-api.js';
import { estimateInferenceMemory } from '../../src-shared/inference-memory.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, ROOT, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

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
    await page.locator('[data-testid=chat-input]').fill('Tell me a story about a cat.');
    await page.locator('[data-testid=chat-input]').press('Enter');
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

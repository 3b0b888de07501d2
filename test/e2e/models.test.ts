// The model picker in a browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve` whose HOME is a temporary folder holding a fake Ollama store (a runnable
// tiny Qwen3 GGUF as a blob, and a Gemma model Hindsight cannot load), an LM Studio folder and
// a Hugging Face cache. The Chat page lists them, grouped by where they were found, with the
// ones that cannot load and why; the model chosen is the one the chat runs (the configured
// default is a path that does not exist, so no other model could answer); "Other…" still takes
// a typed path; the Training page's picker offers the same; a long path (an Ollama blob's) is cut
// short on every page with a picker, never pushing the fields beside it out of the window.
// Screenshots: model-picker.png, model-picker-list.png and model-picker-training.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeGguf as writeGgufFromFolder } from '../../bench/gguf-writer.js';
import type { ChatState } from '../../src-shared/chat-api.js';
import type { ModelCatalog } from '../../src-shared/models-api.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { str, u32, writeGguf, f32Bytes } from '../model/gguf-writer.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, sayInChat, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('models.test.ts');

let dir: string;
let home: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let ollamaBlob: string;
let lmStudioFile: string;

const pick = (testid: string) => page.locator(`[data-testid=${testid}-pick]`);
const baseChip = () => page.locator('[data-testid=chat-column-base] [data-testid=chat-side-status]');

const say = (text: string) => sayInChat(page, text);

/** The element's right edge is within the window: nothing beside it was pushed out of view. */
async function inView(selector: string): Promise<void> {
  await page.locator(selector).first().waitFor();
  const box = (await page.locator(selector).first().boundingBox())!;
  expect(box.x + box.width).toBeLessThanOrEqual(page.viewportSize()!.width);
}

describe.skipIf(!haveChromium)('the model picker, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-models-'));
    home = path.join(dir, 'home');
    const store = path.join(home, '.ollama', 'models');
    writeTinyModel(path.join(dir, 'tiny-qwen3'), { family: 'qwen3' });
    ollamaBlob = path.join(store, 'blobs', `sha256-${'a'.repeat(64)}`);
    writeGgufFromFolder(path.join(dir, 'tiny-qwen3'), ollamaBlob, { type: 'f32' });
    const manifest = (hex: string) => JSON.stringify({ schemaVersion: 2, layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${hex}`, size: 1 }] });
    fs.mkdirSync(path.join(store, 'manifests', 'registry.ollama.ai', 'library', 'tiny-qwen3'), { recursive: true });
    fs.writeFileSync(path.join(store, 'manifests', 'registry.ollama.ai', 'library', 'tiny-qwen3', 'latest'), manifest('a'.repeat(64)));
    writeGguf(path.join(store, 'blobs', `sha256-${'b'.repeat(64)}`), { 'general.architecture': str('gemma3n'), 'general.file_type': u32(2), 'gemma3n.context_length': u32(8192) }, [
      { name: 'token_embd.weight', dims: [8, 16], type: 0, bytes: f32Bytes(new Float32Array(128)) },
    ]);
    fs.mkdirSync(path.join(store, 'manifests', 'registry.ollama.ai', 'library', 'gemma3n'), { recursive: true });
    fs.writeFileSync(path.join(store, 'manifests', 'registry.ollama.ai', 'library', 'gemma3n', 'e2b'), manifest('b'.repeat(64)));
    writeTinyModel(path.join(dir, 'tiny-llama'), { family: 'llama' });
    lmStudioFile = path.join(home, '.lmstudio', 'models', 'lmstudio-community', 'Tiny-Llama-GGUF', 'tiny-llama-f32.gguf');
    writeGgufFromFolder(path.join(dir, 'tiny-llama'), lmStudioFile, { type: 'f32' });
    const repo = path.join(home, '.cache', 'huggingface', 'hub', 'models--org--tiny-qwen3');
    fs.cpSync(path.join(dir, 'tiny-qwen3'), path.join(repo, 'snapshots', 'abc'), { recursive: true });

    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
    for (const k of ['OLLAMA_MODELS', 'HF_HOME', 'HF_HUB_CACHE', 'XDG_CACHE_HOME']) delete env[k];
    serve = await startServe(path.join(dir, 'models.db'), { env });
    // The configured model does not exist: only the model picked on the page can answer.
    await serve.api('updateSettings', { defaultModelDir: path.join(dir, 'no-such-model') });
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1360, height: 900 } }));
    await page.locator('[data-nav=chat]').click();
    await page.locator('[data-testid=chat-model-pick][data-loading=false]').waitFor();
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  });

  it('lists the loadable models by source, then "Other…", then those found that cannot load with the reason', async () => {
    const catalog = await serve.api<ModelCatalog>('listModels');
    expect(catalog.models.map((m) => `${m.source} ${m.name} ${m.loadable}`)).toEqual([
      'ollama tiny-qwen3:latest true', 'ollama gemma3n:e2b false', 'lmstudio lmstudio-community/Tiny-Llama-GGUF/tiny-llama-f32.gguf true', 'huggingface org/tiny-qwen3 true',
    ]);
    expect(await pick('chat-model').getAttribute('data-models')).toBe('3');
    const groups = await pick('chat-model').evaluate((el) => Array.from(el.children).map((c) => (c.tagName === 'OPTGROUP' ? `${(c as HTMLOptGroupElement).label}: ${Array.from(c.children).map((o) => o.textContent!.trim()).join(' | ')}` : c.textContent!.trim())));
    expect(groups[0]).toMatch(/^Ollama: tiny-qwen3:latest — \d+(\.\d)?K · F32 · \d+ kB$/);
    expect(groups[1]).toMatch(/^LM Studio: lmstudio-community\/Tiny-Llama-GGUF\/tiny-llama-f32\.gguf — /);
    expect(groups[2]).toMatch(/^Hugging Face cache: org\/tiny-qwen3 — \d+(\.\d)?K · F32 · \d+ kB$/);
    expect(groups[3]).toBe('Other… (type a path)');
    expect(groups[4]).toBe("Found, but Hindsight cannot load: gemma3n:e2b — architecture 'gemma3n' is not supported (supported: llama, qwen2, qwen3, phi3, granite, olmo2, mistral3, smollm3, gemma2, gemma3, glm4)");
    // The configured path is no catalog model: "Other…" with the path field showing it.
    expect(await pick('chat-model').inputValue()).toBe('__other__');
    expect(await page.locator('[data-testid=chat-model]').isVisible()).toBe(true);
    expect(await page.locator('[data-testid=chat-model]').inputValue()).toBe(path.join(dir, 'no-such-model'));
  });

  it('chats with the Ollama model picked from the list', async () => {
    await pick('chat-model').selectOption(ollamaBlob);
    await page.locator('[data-testid=chat-model]').waitFor({ state: 'hidden' });
    expect(await page.locator('[data-testid=model-picker-path]').textContent()).toContain(ollamaBlob);
    expect(await page.locator('[data-testid=model-picker-path]').textContent()).toContain('qwen3 · context 512');
    // How it would answer on this machine (a tiny model: fp32, and the memory a chat with it needs).
    expect(await page.locator('[data-testid=model-picker-path]').textContent()).toMatch(/ · answers here: fp32, about \d+ MB · /);
    // An Ollama blob's long path is cut short on the page, not widening it: the Device field stays in view.
    await inView('[data-testid=chat-device]');
    await page.locator('[data-testid=chat-max-tokens]').fill('6');
    await page.locator('[data-testid=chat-seed]').fill('7');
    await shot(page, 'model-picker');
    await pick('chat-model').evaluate((el) => ((el as HTMLSelectElement).size = 9));
    await shot(page, 'model-picker-list');
    await pick('chat-model').evaluate((el) => ((el as HTMLSelectElement).size = 0));

    await say('Hello there');
    await baseChip().filter({ hasText: 'done' }).waitFor();
    const state = await serve.api<ChatState>('chatStatus');
    expect(state.sides).toHaveLength(1);
    expect(state.sides[0]).toMatchObject({ side: 'base', status: 'done', error: null });
    expect(state.sides[0]!.tokens).toBeGreaterThan(0);
    expect(await page.locator('[data-testid=chat-column-base] h2').getAttribute('title')).toBe(ollamaBlob);
  });

  it('still takes a typed path through "Other…"', async () => {
    await pick('chat-model').selectOption('__other__');
    const field = page.locator('[data-testid=chat-model]');
    await field.waitFor({ state: 'visible' });
    await field.fill(lmStudioFile);
    await field.press('Tab'); // the change that starts a new conversation with another model
    await page.locator('[data-testid=chat-column-base] .msg').first().waitFor({ state: 'detached' });
    await say('Hello again');
    await baseChip().filter({ hasText: 'done' }).waitFor();
    expect((await serve.api<ChatState>('chatStatus')).sides[0]).toMatchObject({ status: 'done', error: null });
    expect(await page.locator('[data-testid=chat-column-base] h2').getAttribute('title')).toBe(lmStudioFile);
  });

  it('offers the same models on the Training page, and the run form takes the path picked', async () => {
    await page.locator('[data-nav=training]').click();
    await page.locator('[data-testid=train-model-pick][data-loading=false]').waitFor();
    // The configured default is not there, and the page says so until another model is picked.
    await page.locator('[data-testid=train-model-missing]').waitFor();
    const hf = path.join(home, '.cache', 'huggingface', 'hub', 'models--org--tiny-qwen3', 'snapshots', 'abc');
    await pick('train-model').selectOption(hf);
    expect(await page.locator('[data-testid=train-model]').inputValue()).toBe(hf);
    await page.locator('[data-testid=train-model-missing]').waitFor({ state: 'detached' });
    await pick('train-model').selectOption(ollamaBlob);
    await inView('[data-testid=train-model-pick]');
    await shot(page, 'model-picker-training');
    for (const nav of ['evaluate', 'settings'] as const) {
      await page.locator(`[data-nav=${nav}]`).click();
      // Measured once the list is in: the chosen model's line (its path) is what could widen the page.
      await inView(`[data-testid=${nav === 'evaluate' ? 'eval-model' : 'default-model'}-pick][data-loading=false]`);
    }
    expect(pageErrors).toEqual([]);
  });
});

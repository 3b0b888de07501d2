// Generation never runs past the model's positions (issue 11, item 13): the rule of
// src-main/model/context-limit.ts, as LocalModel, the in-thread engine and `hindsight
// generate` apply it, on the demo model (stories260K: max_position_embeddings 512).
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContextLengthError, keepPromptTail, replyBudget } from '../../src-main/model/context-limit.js';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { runCli as cli } from '../helpers/cli.js';

const STORIES = path.resolve('resources/models/stories260K');
const POSITIONS = 512;

describe('the rule', () => {
  it('caps the reply to the room the prompt leaves, and refuses a prompt that leaves none', () => {
    expect(replyBudget(10, 100, POSITIONS)).toBe(100);
    expect(replyBudget(500, 100, POSITIONS)).toBe(12);
    expect(replyBudget(511, 100, POSITIONS)).toBe(1);
    expect(() => replyBudget(512, 1, POSITIONS)).toThrow(ContextLengthError);
    expect(() => replyBudget(12_017, 1, POSITIONS)).toThrow(/the prompt is 12017 tokens, but the model has 512 positions/);
  });

  it('cuts a prompt from the left, keeping its BOS, so the reserve fits', () => {
    const ids = Array.from({ length: 600 }, (_, i) => (i === 0 ? 1 : 100 + (i % 50)));
    const cut = keepPromptTail(ids, POSITIONS, 128, 1);
    expect(cut.ids).toHaveLength(POSITIONS - 128);
    expect(cut.ids[0]).toBe(1);
    expect(cut.ids.slice(1)).toEqual(ids.slice(ids.length - (POSITIONS - 129)));
    expect(cut.dropped).toBe(600 - (POSITIONS - 128));
    expect(keepPromptTail(ids.slice(0, 300), POSITIONS, 128, 1)).toEqual({ ids: ids.slice(0, 300), dropped: 0 });
  });
});

describe('LocalModel.generate on the demo model', () => {
  let model: LocalModel;
  beforeAll(async () => {
    model = await LocalModel.load(STORIES);
  });
  afterAll(() => model?.close());

  it('knows its positions from config.json', () => {
    expect(model.maxPositions).toBe(POSITIONS);
  });

  it('a budget of 8,192 new tokens stops at the last position (finish reason length)', async () => {
    const out = await model.generate([1], { maxNewTokens: 8192, stopTokenIds: [] });
    expect(out.maxNewTokens).toBe(POSITIONS - 1);
    expect(out.tokens).toHaveLength(POSITIONS - 1);
    expect(out.finishReason).toBe('length');
  }, 60_000);

  it('a prompt with no room for a reply is a ContextLengthError, before any work', async () => {
    const ids = Array.from({ length: POSITIONS }, () => 100);
    const err = await model.generate(ids, { maxNewTokens: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContextLengthError);
    expect(err).toMatchObject({ promptTokens: POSITIONS, maxPositions: POSITIONS });
  });
});

describe('the in-thread engine (for code that already runs in a worker)', () => {
  it('applies the same rule', async () => {
    const engine = ModelEngine.open(STORIES);
    try {
      await expect(engine.generate(Array.from({ length: 600 }, () => 100), { maxNewTokens: 4 })).rejects.toThrow(/600 tokens, but the model has 512 positions/);
      const out = await engine.generate(Array.from({ length: 508 }, () => 100), { maxNewTokens: 50, stopTokenIds: [] });
      expect(out.tokens).toHaveLength(4);
    } finally {
      await engine.close();
    }
  });
});

describe('hindsight generate', () => {
  it('a prompt too long for the model is a one-line error, exit 1', async () => {
    const r = await cli('generate', '--model', STORIES, '--prompt', 'Once upon a time there was a cat. '.repeat(200));
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/but the model has 512 positions \(its context length\)/);
  });

  it('caps --max-new-tokens to the positions left, with a note', async () => {
    const r = await cli('generate', '--model', STORIES, '--prompt', 'Once upon a time', '--no-chat-template', '--max-new-tokens', '8192', '--json');
    expect(r.code).toBe(0);
    const out = r.json();
    expect(out.prompt_tokens + out.tokens.length).toBeLessThanOrEqual(POSITIONS);
    if (out.finish_reason === 'length') expect(out.prompt_tokens + out.tokens.length).toBe(POSITIONS);
    expect(r.stderr).toMatch(new RegExp(`note: --max-new-tokens 8192 capped to ${POSITIONS - out.prompt_tokens}: the model answers within 512 tokens and the prompt takes`));
  }, 60_000);
});

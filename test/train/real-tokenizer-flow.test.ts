// import → judge → train → generate → score, end to end, with real tokenizers and chat
// templates (tools/real-tokenizers.ts) on tiny random models of their full vocabulary:
// Qwen3 with thinking on and off, tool calls through the Qwen3 template, Llama 3, and a
// DeepSeek-R1-style template (its generation prompt opens <think>). The models are random,
// so what is checked is the plumbing: every sample trains, the spans sit where the
// templates put them, generation starts from the template's prompt, and the trained
// adapter scores the very reply tokens the trainer trained.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalModel } from '../../src-main/model/local-model.js';
import type { ChatMessage } from '../../src-main/model/tokenizer.js';
import { readLog } from '../../src-main/train/trainer-log.js';
import { runCli as cli } from '../helpers/cli.js';
import { deepSeekR1Template, writeRealTinyModel, type RealTokenizer } from '../../tools/real-tokenizers.js';
import type { TinyFamily } from '../../tools/tiny-models.js';
import { tempDir } from '../store/helpers.js';

const root = tempDir('hindsight-real-flow-');
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
const TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

/** Two chats: a reply the user thanks for (+1) and one they correct (−1, with a hint). */
function chats(reply: (plain: string) => string, toolCalls: boolean): unknown[] {
  const toolTurns = toolCalls
    ? [{ role: 'assistant', content: '', tool_calls: [CALL] }, { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' }]
    : [];
  return [
    {
      id: 'good', ...(toolCalls ? { tools: TOOLS } : {}),
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'What is the weather in Paris?' }, ...toolTurns,
        { role: 'assistant', content: reply('It is sunny and 18°C in Paris.') },
        { role: 'user', content: 'Perfect, thanks!' },
      ],
    },
    {
      id: 'bad',
      messages: [
        { role: 'user', content: 'Write a haiku about the sea.' },
        { role: 'assistant', content: reply('The mountains are tall.') },
        { role: 'user', content: 'No, I asked about the sea, not mountains. Please write about the sea.' },
      ],
    },
  ];
}

interface Case {
  label: string;
  tokenizer: RealTokenizer;
  family: TinyFamily;
  chatTemplate?: string;
  reply: (plain: string) => string;
  toolCalls?: boolean;
  /** Template variables for generation (Qwen3's enable_thinking). */
  extra?: Record<string, unknown>;
  /** What the generation prompt ends with. */
  promptEnd: string;
  /** What each trained reply span ends with. */
  spanEnd: string;
}

const CASES: Case[] = [
  {
    label: 'Qwen3, thinking on (replies carry <think> reasoning)', tokenizer: 'qwen3', family: 'qwen3',
    reply: (plain) => `<think>\nThe user asked; answer briefly.\n</think>\n\n${plain}`, promptEnd: '<|im_start|>assistant\n', spanEnd: '<|im_end|>\n',
  },
  {
    label: 'Qwen3, thinking off (enable_thinking false)', tokenizer: 'qwen3', family: 'qwen3', reply: (plain) => plain,
    extra: { enable_thinking: false }, promptEnd: '<|im_start|>assistant\n<think>\n\n</think>\n\n', spanEnd: '<|im_end|>\n',
  },
  {
    label: 'Qwen3, tool calls and tools in the system turn', tokenizer: 'qwen3', family: 'qwen3', reply: (plain) => plain, toolCalls: true,
    promptEnd: '<|im_start|>assistant\n', spanEnd: '<|im_end|>\n',
  },
  {
    label: 'Llama 3 (its real tokenizer and template)', tokenizer: 'llama3', family: 'llama', reply: (plain) => plain,
    promptEnd: '<|start_header_id|>assistant<|end_header_id|>\n\n', spanEnd: '<|eot_id|>',
  },
  {
    label: 'DeepSeek-R1 style (the generation prompt opens <think>)', tokenizer: 'deepseek', family: 'qwen2', chatTemplate: deepSeekR1Template(),
    reply: (plain) => `<think>\nThe user asked; answer briefly.\n</think>\n\n${plain}`, promptEnd: '<｜Assistant｜><think>\n', spanEnd: '<｜end▁of▁sentence｜>',
  },
];

describe.each(CASES)('$label', (c) => {
  const dir = path.join(root, c.label.replace(/\W+/g, '-'));
  const db = path.join(dir, 'chats.db');
  const out = path.join(dir, 'adapter');

  it('imports, judges, trains every sample, generates from the template\'s prompt and scores with the adapter', async () => {
    const model = writeRealTinyModel(path.join(dir, 'model'), c.tokenizer, { family: c.family, chatTemplate: c.chatTemplate });
    const exportFile = path.join(dir, 'chats.jsonl');
    fs.writeFileSync(exportFile, chats(c.reply, c.toolCalls ?? false).map((l) => JSON.stringify(l)).join('\n') + '\n');
    expect((await cli('import', exportFile, '--db', db)).code).toBe(0);
    // Both chats train: neither is held out for evaluation (docs/design.md §Evaluation).
    expect((await cli('split', '--db', db, '--train', 'openai:good', '--train', 'openai:bad')).code).toBe(0);
    const judged = await cli('judge', '--db', db, '--hints', '--json');
    expect(judged.code).toBe(0);
    // With tool calls, the tool-call turn is a sample too (its next state is the tool result).
    expect(judged.json()).toMatchObject({ judged: c.toolCalls ? 3 : 2 });

    const trained = await cli('train', '--db', db, '--model', model.dir, '--out', out, '--method', 'combine', '--steps', '1', '--lora-r', '2', '--json');
    expect(trained.stderr).toMatch(/step 1\/1 loss/);
    expect(trained.code).toBe(0);
    // A reply that only calls a tool trains too: its span is the call as the template writes it.
    expect(trained.json()).toMatchObject({ status: 'finished', rows: c.toolCalls ? 3 : 2, skipped: {}, truncated: 0 });
    expect(readLog(path.join(out, 'trainer_log.jsonl'))).toHaveLength(1);
    const rows = fs.readFileSync(path.join(out, 'dataset.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const tok = model.tokenizer;
    for (const row of rows) {
      expect(tok.decode(row.input_ids.slice(0, row.response_start), false).endsWith(c.promptEnd.replace('<think>\n\n</think>\n\n', ''))).toBe(true);
      const span = tok.decode(row.input_ids.slice(row.response_start), false);
      expect(span.endsWith(c.spanEnd)).toBe(true);
      if (c.reply('') !== '') expect(span).toContain('The user asked; answer briefly.\n</think>\n\n'); // the reasoning trains too
    }
    if (c.toolCalls) {
      const spans = rows.map((r) => tok.decode(r.input_ids.slice(r.response_start), false));
      expect(spans.filter((s) => s.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'))).toHaveLength(1);
      // The session's tools are in the prompt of its rows, as they were when the model replied.
      const prompts = rows.map((r) => tok.decode(r.input_ids.slice(0, r.response_start), false));
      expect(prompts.filter((p) => p.includes('<tools>\n{"type": "function", "function": {"name": "get_weather"'))).toHaveLength(2);
    }
    expect(rows.map((r) => r.reward).sort()).toEqual(c.toolCalls ? [-1, 1, 1] : [-1, 1]);
    expect(rows.some((r) => r.teacher_input_ids)).toBe(true); // the correction's hint

    const messages: ChatMessage[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const local = await LocalModel.load(model.dir);
    try {
      const gen = await local.generate(messages, { maxNewTokens: 4, temperature: 0, template: { extra: c.extra, tools: c.toolCalls ? TOOLS : undefined } });
      const prompt = tok.applyChatTemplate(messages, { addGenerationPrompt: true, extra: c.extra, tools: c.toolCalls ? TOOLS : undefined });
      expect(prompt.endsWith(c.promptEnd)).toBe(true);
      expect(gen.promptTokens).toBe(tok.encode(prompt).length);
      expect(gen.tokens.length).toBeGreaterThan(0);
      expect(gen.tokens.every((id) => id < (model.config.vocab_size as number))).toBe(true);
    } finally {
      await local.close();
    }

    const scoreIn = path.join(dir, 'score.jsonl');
    const scoreOut = path.join(dir, 'scored.jsonl');
    fs.writeFileSync(scoreIn, rows.map((r) => JSON.stringify({ input_ids: r.input_ids, response_start: r.response_start })).join('\n') + '\n');
    const scored = await cli('score', '--model', model.dir, '--input', scoreIn, '--out', scoreOut, '--adapter', out);
    expect(scored.code).toBe(0);
    const logprobs = fs.readFileSync(scoreOut, 'utf8').trim().split('\n').map((l) => JSON.parse(l).logprobs as number[]);
    expect(logprobs.map((l) => l.length)).toEqual(rows.map((r) => r.input_ids.length - r.response_start));
    expect(logprobs.flat().every((x) => Number.isFinite(x) && x <= 0)).toBe(true);
  }, 240_000);
});

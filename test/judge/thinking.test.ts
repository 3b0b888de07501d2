// Thinking judges get their budget (issue 33, item 3): thinking is turned off where the template
// allows (`enable_thinking: false`: rendered so by the local judge, sent as chat_template_kwargs
// to a server); a judge that always thinks gets a thinking budget; a vote cut off by the token
// limit before its answer is unreadable, and the run counts it.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCompleter } from '../../src-main/judge/local-completer.js';
import { DEFAULT_JUDGE_MAX_TOKENS, LlmJudge, THINKING_JUDGE_MAX_TOKENS, type ChatCompleter } from '../../src-main/judge/llm-judge.js';
import { OpenAiClient } from '../../src-main/judge/openai-client.js';
import { CUT_OFF_NOTE, parseRewardAnswer, wasCutOff } from '../../src-main/judge/parse.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { judgeRunNotes } from '../../src-shared/judge-notes.js';
import { demoModelWithPositions, scriptedServer, sortingWorkspace, type ScriptedServer } from './helpers.js';

const servers: ScriptedServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

describe('an OpenAI-compatible judge', () => {
  it('asks for thinking off through chat_template_kwargs; a server that refuses the field is asked again without it', async () => {
    const server = await scriptedServer((body) =>
      body.chat_template_kwargs ? { status: 400, body: { error: { message: "Unrecognized request argument supplied: chat_template_kwargs" } } } : { content: '\\boxed{1}' });
    servers.push(server);
    const ws = await sortingWorkspace();
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'm', backoffMs: 1, concurrency: 1 }));
    const summary = await runJudge(ws, judge, { hints: false, votes: 1 });
    expect(summary).toMatchObject({ judged: 3, failed: 0 });
    expect(server.requests[0]!.body.chat_template_kwargs).toEqual({ enable_thinking: false });
    // Refused once; every later request goes without the field.
    expect(server.requests.slice(1).map((r) => 'chat_template_kwargs' in r.body)).toEqual([false, false, false]);
    ws.close();
  });

  it('a vote stopped by max_tokens mid-thought is unreadable and counted; the note says so', async () => {
    let n = 0;
    const server = await scriptedServer(() => {
      const cut = n++ % 2 === 0;
      return cut
        ? { body: { choices: [{ index: 0, message: { role: 'assistant', content: '', reasoning_content: 'Let me weigh the \\boxed{1} option and' }, finish_reason: 'length' }] } }
        : { content: 'It worked. \\boxed{1}' };
    });
    servers.push(server);
    const ws = await sortingWorkspace();
    const judge = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'm', concurrency: 1 }), { maxTokens: 32 });
    const summary = await runJudge(ws, judge, { hints: false, votes: 2 });
    expect(summary).toMatchObject({ judged: 3, cutOffVotes: 3 });
    const votes = ws.listSamples().flatMap((s) => s.label.votes);
    const cut = votes.filter((v) => wasCutOff(v.raw));
    expect(cut).toHaveLength(3);
    for (const v of cut) {
      expect(v.raw.startsWith('<think>Let me weigh')).toBe(true);
      expect(v.raw).not.toContain('</think>'); // reasoning never closed: no answer after it
      expect(v.reward).toBeUndefined();
      expect(parseRewardAnswer(v.raw)).toBeUndefined(); // the \boxed{1} inside the reasoning never counts
    }
    expect(ws.listSamples().map((s) => s.label.reward)).toEqual([1, 1, 1]);
    expect(judgeRunNotes(summary)).toEqual([
      "3 votes stopped at the judge's token limit before answering, counted as unreadable (a thinking judge needs more max tokens)",
    ]);
    ws.close();
  });
});

describe('budgets', () => {
  const fake = (alwaysThinks: boolean): ChatCompleter => ({
    backend: 'openai', model: 'f', close: async () => {}, alwaysThinks: () => alwaysThinks,
    complete: async (_m, o) => `max ${o.maxTokens} \\boxed{1}`,
  });
  const input = { sessionId: 's', responseTurn: 1, context: [], response: 'r', responseMessage: { role: 'assistant', content: 'r' }, nextState: { role: 'user', text: 'ok' } } as never;

  it('a judge that always thinks gets a thinking budget unless max tokens is set', async () => {
    expect((await new LlmJudge(fake(true)).judge(input, { hints: false, votes: 1 })).votes[0]!.raw).toContain(`max ${THINKING_JUDGE_MAX_TOKENS} `);
    expect((await new LlmJudge(fake(false)).judge(input, { hints: false, votes: 1 })).votes[0]!.raw).toContain(`max ${DEFAULT_JUDGE_MAX_TOKENS} `);
    expect((await new LlmJudge(fake(true), { maxTokens: 100 }).judge(input, { hints: false, votes: 1 })).votes[0]!.raw).toContain('max 100 ');
  });
});

describe('a local judge whose template has an enable_thinking switch', () => {
  let model: LocalModel;
  beforeAll(async () => {
    const dir = demoModelWithPositions(2048);
    // A Qwen3-style switch: with enable_thinking false the generation prompt closes an empty think block.
    fs.writeFileSync(
      path.join(dir, 'chat_template.jinja'),
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}",
    );
    model = await LocalModel.load(dir);
  });
  afterAll(() => model?.close());

  it('renders its prompts with thinking off, and counts them that way', async () => {
    const messages = [{ role: 'user' as const, content: 'Was it good?' }];
    const off = model.promptIds(messages, { template: { extra: { enable_thinking: false } } });
    expect(off.length).toBeGreaterThan(model.promptIds(messages).length);
    const judge = LocalCompleter.wrap(model);
    expect(judge.countTokens(messages)).toBe(off.length);
    expect(judge.alwaysThinks()).toBe(false);
    const raw = await judge.complete(messages, { temperature: 0.6, maxTokens: 4, seed: 1 });
    expect(raw.endsWith(CUT_OFF_NOTE)).toBe(true); // 4 tokens of a story model: stopped by the limit
  });
});

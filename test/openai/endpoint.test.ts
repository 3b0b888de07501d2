// Hindsight's OpenAI-compatible endpoint over real HTTP, serving the demo model: the
// answers are checked against the model core itself (same seed → same text, same
// log-probs as `score`), streaming against non-streaming, and every refusal's shape.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { LocalModel } from '../../src-main/model/local-model.js';
import { StreamText } from '../../src-main/openai/local-chat.js';
import { parseChatRequest } from '../../src-main/openai/protocol.js';
import { startOpenAiServer, type OpenAiServer } from '../../src-main/openai/server.js';
import { DEMO_MODEL, tempDir } from '../judge/helpers.js';

let server: OpenAiServer;
let model: LocalModel;
beforeAll(async () => {
  [server, model] = await Promise.all([startOpenAiServer({ modelDir: DEMO_MODEL, token: 'secret', port: 0 }), LocalModel.load(DEMO_MODEL)]);
});
afterAll(async () => {
  await server?.close();
  await model?.close();
});

const messages = [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: 'Tell me about a cat.' },
];

function post(body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { Authorization: 'Bearer secret', 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** The `data:` payloads of an SSE body, in order. */
function events(text: string): string[] {
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((block) => {
      expect(block.startsWith('data: ')).toBe(true);
      return block.slice('data: '.length);
    });
}

describe('GET /v1/models and auth', () => {
  it('lists the served model', async () => {
    const res = await fetch(`${server.baseUrl}/models`, { headers: { Authorization: 'Bearer secret' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ object: 'list', data: [{ id: 'stories260K', object: 'model', created: 0, owned_by: 'hindsight' }] });
  });

  it('refuses a missing or wrong key with OpenAI’s error shape', async () => {
    const tries: Record<string, string>[] = [{}, { Authorization: 'Bearer wrong' }, { Authorization: 'secret' }];
    for (const headers of tries) {
      const res = await fetch(`${server.baseUrl}/models`, { headers });
      expect(res.status).toBe(401);
      expect((await res.json()).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
    }
  });
});

describe('POST /v1/chat/completions', () => {
  it('answers as the model core generates: same seed, same text; usage counts the tokens', async () => {
    const res = await post({ model: 'stories260K', messages, temperature: 0.7, top_p: 0.9, seed: 42, max_tokens: 40 });
    expect(res.status).toBe(200);
    const body = await res.json();
    const direct = await model.generate(messages, { temperature: 0.7, topP: 0.9, seed: 42, maxNewTokens: 40 });
    expect(body).toMatchObject({ object: 'chat.completion', model: 'stories260K', choices: [{ index: 0, message: { role: 'assistant', content: direct.content } }] });
    expect(body.id).toMatch(/^chatcmpl-/);
    const generated = direct.tokens.filter((t) => !model.tokenizer.eosTokenIds.includes(t)).length;
    expect(body.usage).toEqual({ prompt_tokens: direct.promptTokens, completion_tokens: generated, total_tokens: direct.promptTokens + generated });
    expect(body.choices[0].finish_reason).toBe(direct.finishReason === 'length' ? 'length' : 'stop');
  });

  it('n = 3: three choices from one batch, choice j the reply seed + j alone gives; usage sums them', async () => {
    const res = await post({ messages, temperature: 0.9, seed: 7, max_tokens: 30, n: 3, logprobs: true });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.choices).toHaveLength(3);
    let completion = 0;
    for (let j = 0; j < 3; j++) {
      const direct = await model.generate(messages, { temperature: 0.9, seed: 7 + j, maxNewTokens: 30 });
      expect(body.choices[j]).toMatchObject({ index: j, message: { role: 'assistant', content: direct.content } });
      const kept = direct.tokens.filter((t) => !model.tokenizer.eosTokenIds.includes(t)).length;
      expect(body.choices[j].logprobs.content).toHaveLength(kept);
      completion += kept;
      if (j === 0) expect(body.usage.prompt_tokens).toBe(direct.promptTokens);
    }
    expect(body.usage.completion_tokens).toBe(completion);
    expect(new Set(body.choices.map((c: { message: { content: string } }) => c.message.content)).size).toBeGreaterThan(1);
  });

  it('max_tokens caps the reply (finish_reason length); greedy without a seed is deterministic', async () => {
    const a = await (await post({ messages, temperature: 0, max_tokens: 5 })).json();
    const b = await (await post({ messages, temperature: 0, max_tokens: 5 })).json();
    expect(a.choices[0]).toMatchObject({ finish_reason: 'length' });
    expect(a.usage.completion_tokens).toBe(5);
    expect(b.choices[0].message.content).toBe(a.choices[0].message.content);
  });

  it('stop strings cut the reply before them', async () => {
    const full = (await (await post({ messages, seed: 7, max_tokens: 60 })).json()).choices[0].message.content as string;
    const words = full.split(' ');
    expect(words.length).toBeGreaterThan(4);
    const stop = ' ' + words[3];
    const cut = await (await post({ messages, seed: 7, max_tokens: 60, stop: [stop] })).json();
    expect(cut.choices[0].finish_reason).toBe('stop');
    expect(cut.choices[0].message.content).toBe(full.slice(0, full.indexOf(stop)).trim());
  });

  it('logprobs are the model’s own: equal to scoring the same tokens', async () => {
    const body = await (await post({ messages, seed: 3, max_tokens: 12, logprobs: true })).json();
    const content = body.choices[0].logprobs.content as { token: string; logprob: number }[];
    expect(content).toHaveLength(body.usage.completion_tokens);
    const promptIds = model.promptIds(messages);
    const direct = await model.generate(promptIds, { seed: 3, maxNewTokens: 12, temperature: 1 });
    const tokens = direct.tokens.filter((t) => !model.tokenizer.eosTokenIds.includes(t));
    const [scored] = await model.score([{ inputIds: [...promptIds, ...tokens], responseStart: promptIds.length }]);
    content.forEach((c, i) => expect(c.logprob).toBeCloseTo(scored![i]!, 4));
  });

  it('streams OpenAI chunks ending with [DONE]; the deltas add up to the non-streaming reply', async () => {
    const request = { messages, seed: 11, max_tokens: 30, temperature: 0.8 };
    const whole = await (await post(request)).json();
    const res = await post({ ...request, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const data = events(await res.text());
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    for (const c of chunks) expect(c).toMatchObject({ object: 'chat.completion.chunk', model: 'stories260K', id: chunks[0].id });
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe(whole.choices[0].message.content);
    expect(chunks.length).toBeGreaterThan(5); // really incremental
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finish).toHaveLength(1);
    expect(finish[0].choices[0].finish_reason).toBe(whole.choices[0].finish_reason);
    const usage = chunks.at(-1);
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toEqual(whole.usage);
  });

  it('n = 3 streamed: each choice’s chunks name its index, open with its role, end once, and add up to that choice without streaming; usage sums them', async () => {
    const request = { messages, seed: 21, max_tokens: 30, temperature: 0.9, n: 3 };
    const whole = await (await post(request)).json();
    const data = events(await (await post({ ...request, stream: true, stream_options: { include_usage: true } })).text());
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    const usage = chunks.pop();
    expect(usage.usage).toEqual(whole.usage);
    for (const c of chunks) expect(c.choices).toHaveLength(1);
    for (let j = 0; j < 3; j++) {
      const mine = chunks.filter((c) => c.choices[0].index === j).map((c) => c.choices[0]);
      expect(mine[0].delta).toEqual({ role: 'assistant', content: '' });
      expect(mine.map((c) => c.delta.content ?? '').join('')).toBe(whole.choices[j].message.content);
      expect(mine.filter((c) => c.finish_reason).map((c) => c.finish_reason)).toEqual([whole.choices[j].finish_reason]);
      expect(mine.at(-1).finish_reason).not.toBeNull();
    }
    // Streamed as they come: one choice’s text arrives between another's chunks, not choice after choice.
    const order = chunks.filter((c) => c.choices[0].delta.content).map((c) => c.choices[0].index);
    expect(order.some((index, k) => k > 0 && index < order[k - 1])).toBe(true);
  });

  it('a streamed reply with a stop string never shows the stop text', async () => {
    const full = (await (await post({ messages, seed: 5, max_tokens: 60 })).json()).choices[0].message.content as string;
    const stop = full.split(' ').slice(2, 4).join(' ');
    const res = await post({ messages, seed: 5, max_tokens: 60, stop, stream: true });
    const text = events(await res.text())
      .slice(0, -1)
      .map((d) => JSON.parse(d).choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe(full.slice(0, full.indexOf(stop)).trim());
  });

  it('refuses bad requests with 4xx naming the field, never a crash', async () => {
    const bad = async (body: unknown, status = 400, headers: Record<string, string> = {}) => {
      const res = await post(body, headers);
      expect(res.status).toBe(status);
      return (await res.json()).error as { message: string; param: string | null };
    };
    expect(await bad('{not json')).toMatchObject({ message: expect.stringMatching(/not valid JSON/) });
    expect(await bad({ messages: [] })).toMatchObject({ param: 'messages' });
    expect(await bad({ messages, temperature: 5 })).toMatchObject({ param: 'temperature', message: 'temperature must be a number in [0, 2] (got 5)' });
    expect(await bad({ messages, max_tokens: 0 })).toMatchObject({ param: 'max_tokens' });
    expect(await bad({ messages, n: 17 })).toMatchObject({ param: 'n' });
    expect(await bad({ messages: [{ role: 'robot', content: 'x' }] })).toMatchObject({ param: 'messages[0].role' });
    expect(await bad({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] })).toMatchObject({
      param: 'messages[0].content[0]',
      message: expect.stringMatching(/only text parts are supported \(got type 'image_url'\)/),
    });
    expect(await bad({ messages, stream: true, logprobs: true })).toMatchObject({ param: 'logprobs' });
    expect(await bad({ messages }, 415, { 'Content-Type': 'text/plain' })).toMatchObject({ message: expect.stringMatching(/application\/json/) });
    const get = await fetch(`${server.baseUrl}/chat/completions`, { headers: { Authorization: 'Bearer secret' } });
    expect(get.status).toBe(405);
    const unknown = await fetch(`${server.baseUrl}/embeddings`, { method: 'POST', headers: { Authorization: 'Bearer secret' } });
    expect(unknown.status).toBe(404);
  });

  it('refuses a body over 8 MB with 413 in OpenAI’s error shape, and closes that connection', async () => {
    const res = await post(' '.repeat(8 * 1024 * 1024 + 1));
    expect(res.status).toBe(413);
    expect(res.headers.get('connection')).toBe('close');
    expect((await res.json()).error).toMatchObject({ type: 'invalid_request_error', message: expect.stringMatching(/larger than 8 MB/) });
  });

  it('accepts text parts, developer messages and an unknown model name', async () => {
    const res = await post({
      model: 'gpt-4o',
      messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
      max_tokens: 3,
    });
    expect(res.status).toBe(200);
    expect((await res.json()).model).toBe('stories260K');
    expect(parseChatRequest({ messages: [{ role: 'developer', content: 'x' }] }).messages[0]).toEqual({ role: 'system', content: 'x' });
  });

  it('offers the tools tool_choice leaves: all, none, or the one it names; a bad choice is a 400 naming it', async () => {
    const tool = (name: string) => ({ type: 'function', function: { name, parameters: { type: 'object' } } });
    const tools = [tool('get_weather'), tool('search')];
    const offered = (tool_choice: unknown) => parseChatRequest({ messages: [{ role: 'user', content: 'x' }], tools, tool_choice }).tools;
    const bad = async (body: unknown) => {
      const res = await post(body);
      expect(res.status).toBe(400);
      return (await res.json()).error as { message: string; param: string | null };
    };
    expect([undefined, 'auto', 'required'].map(offered)).toEqual([tools, tools, tools]);
    expect(offered('none')).toBeUndefined();
    expect(offered({ type: 'function', function: { name: 'search' } })).toEqual([tool('search')]);
    expect(await bad({ messages: [{ role: 'user', content: 'x' }], tools, tool_choice: 'always' })).toMatchObject({ param: 'tool_choice', message: expect.stringMatching(/^tool_choice must be "none", "auto", "required"/) });
    expect(await bad({ messages: [{ role: 'user', content: 'x' }], tools, tool_choice: { type: 'function', function: { name: 'shell' } } }))
      .toMatchObject({ param: 'tool_choice', message: "tool_choice names the function 'shell', which tools does not list" });
  });
});

describe('the model’s context (stories260K: 512 positions)', () => {
  /** A user message of about `tokens` prompt tokens on the demo model. */
  const story = (repeats: number) => [{ role: 'user', content: 'Once upon a time there was a cat. '.repeat(repeats) }];

  it('a prompt that does not fit gets 400 context_length_exceeded, in OpenAI’s shape, streaming or not', async () => {
    const long = story(1200); // about 12,000 tokens
    for (const stream of [false, true]) {
      const res = await post({ messages: long, max_tokens: 16, stream });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      const { error } = await res.json();
      expect(error).toMatchObject({ type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' });
      expect(error.message).toMatch(/^This model's maximum context length is 512 tokens\. However, your messages resulted in \d{5} tokens/);
    }
  });

  it('max_tokens is capped to what the prompt leaves: prompt and reply stay within 512 tokens', async () => {
    const prompt = model.promptIds(story(48), { chatTemplate: true });
    expect(prompt.length).toBeGreaterThan(400);
    expect(prompt.length).toBeLessThan(512);
    const started = Date.now();
    const body = await (await post({ messages: story(48), temperature: 0, max_tokens: 8192 })).json();
    expect(body.usage.prompt_tokens).toBe(prompt.length);
    expect(body.usage.total_tokens).toBeLessThanOrEqual(512);
    expect(body.choices[0].finish_reason).toBe('length');
    expect(Date.now() - started).toBeLessThan(30_000);
    const streamed = await post({ messages: story(48), temperature: 0, max_tokens: 8192, stream: true, stream_options: { include_usage: true } });
    const chunks = events(await streamed.text());
    const usage = JSON.parse(chunks.at(-2)!).usage;
    expect(usage.total_tokens).toBeLessThanOrEqual(512);
  }, 60_000);
});

describe('stream text: only prefixes of the final answer are sent', () => {
  // A crafted decoder: token i decodes to pieces[i].
  const pieces = ['Hel', 'lo', ' wor', 'ld', '</', 'think', '>', 'Ans', 'wer'];
  const decode = (ids: number[]) => ids.map((i) => pieces[i]).join('');

  it('holds back a suffix that may become a stop string', () => {
    const s = new StreamText(decode, false, ['world'], []);
    expect(s.push(0)).toEqual({ content: 'Hel' });
    expect(s.push(1)).toEqual({ content: 'lo' });
    expect(s.push(2)).toEqual({}); // " wor" may start "world": held back (the trailing space trims away)
    expect(s.finish('Hello', undefined)).toEqual({});
  });

  it('never sends a completed stop string (the engine checks it only after this token)', () => {
    const s = new StreamText(decode, false, ['lo w'], []);
    expect(s.push(0)).toEqual({ content: 'He' }); // the final "l" may start "lo w"
    expect(s.push(1)).toEqual({ content: 'l' }); // "Hello": "lo" is held
    expect(s.push(2)).toEqual({}); // "Hello wor" contains the stop: cut to "Hel"
    expect(s.finish('Hel', undefined)).toEqual({});
  });

  it('splits reasoning from content when the prompt opened <think>', () => {
    const s = new StreamText(decode, true, [], []);
    const deltas = [0, 1, 2, 3, 4, 5, 6, 7, 8].map((t) => s.push(t));
    expect(deltas.map((d) => d.reasoning ?? '').join('')).toBe('Hello world');
    expect(deltas.map((d) => d.content ?? '').join('')).toBe('Answer');
    expect(deltas[4]).toEqual({}); // "</" could be the start of "</think>"
  });

  it("sends nothing after Mistral's [TOOL_CALLS] token: the calls come as tool_calls, not content", () => {
    const s = new StreamText((ids) => ids.map((i) => (i === 9 ? '' : pieces[i])).join(''), false, [], [], 9);
    expect([0, 1].map((t) => s.push(t))).toEqual([{ content: 'Hel' }, { content: 'lo' }]);
    expect([9, 2, 3].map((t) => s.push(t))).toEqual([{}, {}, {}]);
    expect(s.finish('Hello', undefined)).toEqual({});
  });

  it('holds an answer that opens with "{" where tools were offered to a bare-JSON caller (Llama 3.1+), and sends it at the end if it is no call', () => {
    const json = ['{"name"', ': "w", ', '"parameters": {}}'];
    const held = new StreamText((ids) => ids.map((i) => json[i]).join(''), false, [], [], undefined, 'json');
    expect([0, 1, 2].map((t) => held.push(t))).toEqual([{}, {}, {}]);
    expect(held.finish('', undefined)).toEqual({}); // parsed as a call: no content at all
    const answer = new StreamText((ids) => ids.map((i) => json[i]).join(''), false, [], [], undefined, 'json');
    [0, 1].forEach((t) => answer.push(t));
    expect(answer.finish('{"name": "w", ', undefined)).toEqual({ content: '{"name": "w", ' });
    // Without tools offered, JSON streams as it comes.
    const plain = new StreamText((ids) => ids.map((i) => json[i]).join(''), false, [], []);
    expect(plain.push(0)).toEqual({ content: '{"name"' });
  });

  it("holds a GLM-4 name line while it may still be a call, and streams an answer once it cannot be one", () => {
    const call = ['get_', 'weather\n', '{"city": ', '"Paris"}'];
    const held = new StreamText((ids) => ids.map((i) => call[i]).join(''), false, [], [], undefined, 'name-line');
    expect([0, 1, 2, 3].map((t) => held.push(t))).toEqual([{}, {}, {}, {}]);
    const words = ['Sunny', ' and warm.'];
    const answer = new StreamText((ids) => ids.map((i) => words[i]).join(''), false, [], [], undefined, 'name-line');
    expect(answer.push(0)).toEqual({}); // one word could still be a function's name
    expect(answer.push(1)).toEqual({ content: 'Sunny and warm.' });
  });

  it('waits for the rest of a multi-byte character', () => {
    const bytes = ['caf', '\uFFFD', 'é'];
    const s = new StreamText((ids) => (ids.length === 2 ? 'caf\uFFFD' : ids.map((i) => bytes[i]).join('').replace('\uFFFD', '')), false, [], []);
    expect(s.push(0)).toEqual({ content: 'caf' });
    expect(s.push(1)).toEqual({});
    expect(s.push(2)).toEqual({ content: 'é' });
  });
});

describe('mounted on hindsight serve under /v1', () => {
  let app: ServeHandle;
  beforeAll(async () => {
    app = await serveApp({ dbPath: path.join(tempDir(), 'serve.db'), port: 0, buildRenderer: false, openaiModelDir: DEMO_MODEL });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('answers with the launch token as the API key, beside the app’s own API', async () => {
    const base = `http://127.0.0.1:${app.port}`;
    const models = await fetch(`${base}/v1/models`, { headers: { Authorization: `Bearer ${app.token}` } });
    expect((await models.json()).data[0].id).toBe('stories260K');
    const chat = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${app.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages, max_tokens: 4, temperature: 0 }),
    });
    expect((await chat.json()).usage.completion_tokens).toBe(4);
    expect((await fetch(`${base}/v1/models`)).status).toBe(401);
    const stats = await fetch(`${base}/api/stats`, { method: 'POST', headers: { Authorization: `Bearer ${app.token}`, 'Content-Type': 'application/json' }, body: '{}' });
    expect((await stats.json()).ok).toBe(true);
  });
});

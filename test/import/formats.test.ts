// ShareGPT, OpenAI chat JSONL and Hugging Face messages (JSON and JSONL).
import { describe, expect, it } from 'vitest';
import { importAll, roles, tempDir, writeJson, writeText } from './helpers.js';

const dir = tempDir();
const jsonl = (records: unknown[]) => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

describe('ShareGPT', () => {
  it('reads an array with system, tools, function_call and observation', async () => {
    const tools = JSON.stringify([{ name: 'get_weather', parameters: { type: 'object' } }]);
    const file = writeJson(dir, 'sharegpt.json', [
      {
        id: 'sg-1',
        system: 'You are helpful.',
        tools,
        conversations: [
          { from: 'human', value: 'Weather in Oslo?' },
          { from: 'function_call', value: '{"name":"get_weather","arguments":{"city":"Oslo"}}' },
          { from: 'observation', value: '{"temp": -3}' },
          { from: 'gpt', value: 'It is -3°C in Oslo.' },
          { from: 'human', value: 'Thanks' },
        ],
      },
      { conversations: [{ from: 'human', value: 'Hi' }, { from: 'gpt', value: 'Hello' }, { from: 'narrator', value: '?' }] },
    ]);
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('sharegpt');
    const [first, second] = conversations;
    expect(first!.externalId).toBe('sg-1');
    expect(roles(first!)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
    expect(first!.turns[0]!.text).toBe('You are helpful.');
    expect(first!.turns[2]).toEqual({ role: 'assistant', text: '', toolCalls: [{ name: 'get_weather', arguments: '{"city":"Oslo"}' }] });
    expect(first!.turns[3]).toEqual({ role: 'tool', text: '{"temp": -3}', toolName: 'get_weather' });
    expect(first!.metadata).toEqual({ tools });
    expect(roles(second!)).toEqual(['user', 'assistant']);
    expect(second!.externalId).toBeUndefined();
    expect(opened.warnings).toEqual([`${file}: conversation #2: 1 message from an unknown speaker "narrator" skipped`]);
  });

  it('reads a single ShareGPT object', async () => {
    const file = writeJson(dir, 'single.json', { conversations: [{ from: 'human', value: 'A' }, { from: 'gpt', value: 'B' }] });
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('sharegpt');
    expect(conversations.map(roles)).toEqual([['user', 'assistant']]);
  });
});

describe('OpenAI chat JSONL', () => {
  it('reads tool calls and tool results, line by line', async () => {
    const file = writeText(
      dir,
      'chat.jsonl',
      jsonl([
        {
          messages: [
            { role: 'developer', content: 'Be terse.' },
            { role: 'user', content: 'Weather in Oslo?' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
            },
            { role: 'tool', tool_call_id: 'call_1', content: '{"temp": -3}' },
            { role: 'assistant', content: [{ type: 'text', text: '-3°C.' }] },
          ],
        },
      ]) +
        '\n' + // blank lines are allowed
        jsonl([{ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }] }]),
    );
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('openai');
    expect(conversations).toHaveLength(2);
    const c = conversations[0]!;
    expect(roles(c)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant']);
    expect(c.turns[2]).toEqual({ role: 'assistant', text: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' }] });
    expect(c.turns[3]).toEqual({ role: 'tool', text: '{"temp": -3}', toolCallId: 'call_1', toolName: 'get_weather' });
    expect(c.turns[4]!.text).toBe('-3°C.');
    expect(roles(conversations[1]!)).toEqual(['user', 'assistant']);
  });

  it('skips a line whose messages is not a list, naming the line', async () => {
    const file = writeText(dir, 'bad-line.jsonl', jsonl([{ messages: 'nope' }, { messages: [{ role: 'user', content: 'Hi' }] }]));
    const { opened, conversations } = await importAll(file, 'openai');
    expect(conversations).toHaveLength(1);
    expect(opened.warnings).toEqual([`${file}: conversation at line 1 skipped: its "messages" is not an array`]);
  });
});

describe('Hugging Face messages', () => {
  it('reads JSON with content parts; image parts become placeholders without their bytes', async () => {
    const file = writeJson(dir, 'hf.json', [
      {
        messages: [
          { role: 'system', content: [{ type: 'text', text: 'You describe images.' }] },
          {
            role: 'user',
            content: [
              { type: 'image' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
              { type: 'text', text: 'What is this?' },
            ],
          },
          { role: 'assistant', content: [{ type: 'text', text: 'A cat.' }], reasoning_content: 'Looks feline.' },
        ],
      },
    ]);
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('messages');
    const c = conversations[0]!;
    expect(roles(c)).toEqual(['system', 'user', 'assistant']);
    expect(c.turns[1]!.text).toBe('[image]\n[image]\nWhat is this?');
    expect(c.turns[1]!.attachments).toEqual([{ kind: 'image' }, { kind: 'image', mimeType: 'image/png' }]);
    expect(JSON.stringify(c)).not.toContain('iVBORw0KGgo');
    expect(c.turns[2]).toMatchObject({ text: 'A cat.', reasoning: 'Looks feline.' });
  });

  it('reads a single messages object', async () => {
    const file = writeJson(dir, 'one.json', { messages: [{ role: 'user', content: 'Q' }, { role: 'assistant', content: 'A' }] });
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('messages');
    expect(conversations.map(roles)).toEqual([['user', 'assistant']]);
  });

  it('reads JSONL with media lists as messages', async () => {
    const file = writeText(
      dir,
      'hf.jsonl',
      jsonl([
        { messages: [{ role: 'user', content: '<image>Who?' }, { role: 'assistant', content: 'Kane.' }], images: ['a.jpg'] },
        { messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }] },
      ]),
    );
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('messages');
    expect(conversations[0]!.turns[0]).toEqual({ role: 'user', text: '[image]Who?', attachments: [{ kind: 'image', name: 'a.jpg' }] });
    expect(conversations).toHaveLength(2);
  });

  it('names what it skipped in plain words: one message "is", two "are"; a line, a titled conversation', async () => {
    const empty = { role: 'assistant', content: '' };
    const file = writeJson(dir, 'hf-empty.json', [
      { messages: [{ role: 'user', content: 'A' }, empty, { role: 'assistant', content: 'B' }] },
      { title: 'Two blanks', messages: [{ role: 'user', content: 'C' }, empty, empty, { role: 'assistant', content: 'D' }] },
    ]);
    expect((await importAll(file)).opened.warnings).toEqual([
      `${file}: conversation #1: 1 message that is empty skipped`,
      `${file}: conversation #2 “Two blanks”: 2 messages that are empty skipped`,
    ]);
    const lines = writeText(dir, 'hf-empty.jsonl', jsonl([{ messages: [{ role: 'user', content: 'A' }, empty, { role: 'assistant', content: 'B' }] }]));
    expect((await importAll(lines)).opened.warnings).toEqual([`${lines}: conversation at line 1: 1 message that is empty skipped`]);
  });
});

describe('Open WebUI', () => {
  const message = (id: string, parentId: string | null, role: string, content: string, extra: Record<string, unknown> = {}) => ({
    id,
    parentId,
    childrenIds: [],
    role,
    content,
    timestamp: 1_712_000_000,
    ...extra,
  });

  it('walks chat.history from currentId and keeps regenerated replies as alternatives', async () => {
    const file = writeJson(dir, 'chat-export-1712000000.json', [
      {
        id: 'owu-1',
        user_id: 'user-1',
        title: 'Jokes',
        created_at: 1_712_000_000,
        updated_at: 1_712_000_100,
        chat: {
          models: ['llama3:8b'],
          history: {
            currentId: 'a2',
            messages: {
              a2: message('a2', 'u1', 'assistant', '<details type="reasoning" done="true"><summary>Thought for 2 seconds</summary>\n> Keep it short.\n</details>\nWhy did the chicken cross the road?'),
              u1: message('u1', null, 'user', 'Tell me a joke'),
              a1: message('a1', 'u1', 'assistant', 'Knock knock.', { done: false }),
            },
          },
          messages: [],
        },
      },
    ]);
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('openwebui');
    const c = conversations[0]!;
    expect(c.externalId).toBe('owu-1');
    expect(roles(c)).toEqual(['user', 'assistant']);
    expect(c.turns[1]).toMatchObject({ text: 'Why did the chicken cross the road?', reasoning: 'Keep it short.' });
    expect(c.alternatives).toEqual([{ atTurn: 1, turn: { role: 'assistant', text: 'Knock knock.', timestamp: 1_712_000_000, externalId: 'a1', status: 'in_progress' } }]);
    expect(c.metadata).toEqual({ models: ['llama3:8b'], updated_at: 1_712_000_100 });
  });

  it('falls back to the flat messages list, and skips a chat without either', async () => {
    const file = writeJson(dir, 'owu-flat.json', [
      { id: 'flat', title: 'Flat', chat: { messages: [message('x', null, 'user', 'Hi'), message('y', 'x', 'assistant', 'Hello')] } },
      { id: 'empty', title: 'Empty', chat: { title: 'Empty' } },
    ]);
    const { opened, conversations } = await importAll(file, 'openwebui');
    expect(conversations.map(roles)).toEqual([['user', 'assistant']]);
    expect(opened.warnings).toEqual([`${file}: conversation empty “Empty” (conversation #2) skipped: its "chat" has neither a "history" nor a "messages" list`]);
  });
});

// Role and part names come from the export: one that happens to name an Object.prototype member
// ("constructor", "__proto__" …) is as unknown as any other, not a function or object as a role.
describe('names that are Object.prototype members', () => {
  it('are unknown roles and parts in every format, so the rest imports', async () => {
    const openai = writeText(
      dir,
      'proto-openai.jsonl',
      jsonl([{ messages: [{ role: 'user', content: [{ type: 'toString', text: 'Hi' }] }, { role: 'constructor', content: 'x' }, { role: 'assistant', content: 'Hello' }] }]),
    );
    const sharegpt = writeJson(dir, 'proto-sharegpt.json', [{ conversations: [{ from: 'human', value: 'Hi' }, { from: '__PROTO__', value: 'x' }, { from: 'gpt', value: 'Hello' }] }]);
    const claude = writeJson(dir, 'proto-claude.json', [
      { uuid: 'c', chat_messages: [{ sender: 'human', text: 'Hi' }, { sender: 'hasOwnProperty', text: 'x' }, { sender: 'assistant', text: 'Hello' }] },
    ]);
    const openwebui = writeJson(dir, 'proto-owu.json', [
      { id: 'w', chat: { messages: [{ role: 'user', content: 'Hi' }, { role: 'valueOf', content: 'x' }, { role: 'assistant', content: 'Hello' }] } },
    ]);
    const results = await Promise.all([openai, sharegpt, claude, openwebui].map((file) => importAll(file)));
    for (const { conversations } of results) {
      expect(conversations.map(roles)).toEqual([['user', 'assistant']]);
      expect(conversations[0]!.turns[0]!.text).toBe('Hi');
    }
    expect(results.map((r) => r.opened.warnings)).toEqual([
      [
        `${openai}: conversation at line 1: 1 message with an unknown content part "toString" (its text kept)`,
        `${openai}: conversation at line 1: 1 message with an unknown role "constructor" skipped`,
      ],
      [`${sharegpt}: conversation #1: 1 message from an unknown speaker "__PROTO__" skipped`],
      [`${claude}: conversation c (conversation #1): 1 message from an unknown sender "hasOwnProperty" skipped`],
      [`${openwebui}: conversation w (conversation #1): 1 message with an unknown role "valueOf" skipped`],
    ]);
  });
});

// Claude.ai exports: content blocks, tool use and results, attachments, the text fallback.
import { describe, expect, it } from 'vitest';
import { convertClaude } from '../../src-main/import/claude.js';
import { importAll, roles, tempDir, writeJson, writeZip } from './helpers.js';

const convert = (raw: unknown) => convertClaude(raw, { position: 'conversation #1' });

function claudeConversation(chat_messages: unknown, extra: Record<string, unknown> = {}) {
  return { uuid: 'c-1', name: 'Claude chat', created_at: '2025-02-03T04:05:06.000Z', updated_at: '2025-02-03T05:00:00Z', chat_messages, ...extra };
}

const human = (text: string, extra: Record<string, unknown> = {}) => ({
  uuid: `h-${text.length}`,
  sender: 'human',
  text,
  content: [{ type: 'text', text }],
  attachments: [],
  files: [],
  created_at: '2025-02-03T04:05:07Z',
  ...extra,
});

describe('Claude conversations', () => {
  it('splits an assistant message at tool results: call, tool turn, then the reply', () => {
    const c = convert(
      claudeConversation([
        human('Weather in Paris?'),
        {
          uuid: 'a-1',
          sender: 'assistant',
          text: '',
          created_at: '2025-02-03T04:05:08Z',
          content: [
            { type: 'thinking', thinking: 'I should look it up.' },
            { type: 'text', text: 'Let me check.' },
            { type: 'tool_use', id: 'toolu_1', name: 'web_search', input: { query: 'Paris weather' } },
            { type: 'tool_result', tool_use_id: 'toolu_1', name: 'web_search', content: [{ type: 'text', text: 'Sunny, 21°C' }], is_error: false },
            { type: 'thinking', thinking: 'It is sunny.' },
            { type: 'text', text: 'It is sunny and 21°C.' },
          ],
        },
      ]),
    );
    expect(roles(c)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(c.turns[1]).toMatchObject({
      text: 'Let me check.',
      reasoning: 'I should look it up.',
      toolCalls: [{ id: 'toolu_1', name: 'web_search', arguments: '{"query":"Paris weather"}' }],
    });
    expect(c.turns[2]).toMatchObject({ role: 'tool', text: 'Sunny, 21°C', toolCallId: 'toolu_1', toolName: 'web_search' });
    expect(c.turns[3]).toMatchObject({ text: 'It is sunny and 21°C.', reasoning: 'It is sunny.' });
    expect(c.createdAt).toBe(Date.parse('2025-02-03T04:05:06Z') / 1000);
    expect(c.metadata).toEqual({ updated_at: '2025-02-03T05:00:00Z' });
  });

  it('marks an erroring tool result and finds the tool name from the call id', () => {
    const c = convert(
      claudeConversation([
        human('Run it'),
        {
          uuid: 'a-1',
          sender: 'assistant',
          content: [
            { type: 'tool_use', id: 't1', name: 'repl', input: { code: '1/0' } },
            { type: 'tool_result', tool_use_id: 't1', content: 'ZeroDivisionError', is_error: true },
          ],
        },
      ]),
    );
    expect(c.turns[2]).toMatchObject({ role: 'tool', text: 'ZeroDivisionError', toolName: 'repl', status: 'error' });
  });

  it('falls back to `text` when content is empty or missing', () => {
    const c = convert(
      claudeConversation([
        { uuid: 'u', sender: 'human', text: 'Old style question', content: [] },
        { uuid: 'a', sender: 'assistant', text: 'Old style answer' },
        { uuid: 'b', sender: 'assistant', text: 'Blank blocks', content: [{ type: 'text', text: '' }] },
      ]),
    );
    expect(c.turns.map((t) => [t.role, t.text])).toEqual([
      ['user', 'Old style question'],
      ['assistant', 'Old style answer'],
      ['assistant', 'Blank blocks'],
    ]);
  });

  it("appends attachments' extracted_content to the user's text and keeps files as attachments", () => {
    const c = convert(
      claudeConversation([
        human('Summarise this', {
          attachments: [{ file_name: 'report.txt', file_size: 42, file_type: 'text/plain', extracted_content: 'Revenue rose 5%.' }],
          files: [{ file_name: 'chart.png', file_uuid: 'f-1' }],
          files_v2: [{ file_name: 'chart.png', file_uuid: 'f-1', file_kind: 'image' }],
        }),
        { uuid: 'a', sender: 'assistant', content: [{ type: 'text', text: 'Revenue grew.' }] },
      ]),
    );
    expect(c.turns[0]!.text).toBe('Summarise this\n\n[Attachment: report.txt]\nRevenue rose 5%.');
    expect(c.turns[0]!.attachments).toEqual([
      { kind: 'file', name: 'report.txt', mimeType: 'text/plain', meta: { size: 42 } },
      { kind: 'image', name: 'chart.png', meta: { file_uuid: 'f-1' } },
    ]);
  });

  it('warns about unknown blocks and keeps their text', () => {
    const c = convert(
      claudeConversation([
        human('Hi'),
        { uuid: 'a', sender: 'assistant', content: [{ type: 'voice_note', text: 'spoken reply' }, { type: 'widget' }] },
      ]),
    );
    expect(c.turns[1]!.text).toBe('spoken reply');
    expect(c.warnings).toEqual([
      'conversation c-1 “Claude chat” (conversation #1): 1 message with an unknown content block "voice_note" (its text kept)',
      'conversation c-1 “Claude chat” (conversation #1): 1 message with an unknown content block "widget" skipped',
    ]);
  });

  it('skips a conversation whose chat_messages is not an array, and imports the rest', async () => {
    const dir = tempDir();
    const file = writeJson(dir, 'conversations.json', [
      claudeConversation([human('Hi'), { uuid: 'a', sender: 'assistant', content: [{ type: 'text', text: 'Hello' }] }]),
      { uuid: 'c-2', name: 'Broken', chat_messages: 'oops' },
    ]);
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('claude');
    expect(conversations).toHaveLength(1);
    expect(opened.warnings).toEqual([`${file}: conversation c-2 “Broken” (conversation #2) skipped: its "chat_messages" is not an array`]);
  });

  it('imports conversations.json from a Claude export zip', async () => {
    const dir = tempDir();
    const zip = writeZip(`${dir}/data-2025-02-03.zip`, [
      { name: 'users.json', data: '[{"uuid":"u"}]' },
      { name: 'projects.json', data: '[]' },
      { name: 'conversations.json', data: JSON.stringify([claudeConversation([human('Hi'), { uuid: 'a', sender: 'assistant', text: 'Hello' }])]) },
    ]);
    const { opened, conversations } = await importAll(zip);
    expect(opened.format).toBe('claude');
    expect(conversations.map(roles)).toEqual([['user', 'assistant']]);
  });
});

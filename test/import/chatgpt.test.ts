// The ChatGPT fine print (docs/design.md §Imports), one crafted tree per rule.
import { describe, expect, it } from 'vitest';
import { convertChatGpt } from '../../src-main/import/chatgpt.js';
import { chatgptConversation, importAll, roles, tempDir, writeJson, type NodeSpec } from './helpers.js';

const convert = (raw: unknown) => convertChatGpt(raw, { position: 'conversation #1' });
const root: NodeSpec = { id: 'root', parent: null };

describe('ChatGPT active branch', () => {
  it('starts from the root even when the root is not the first key', () => {
    const c = convert(
      chatgptConversation([
        { id: 'a1', parent: 'u1', role: 'assistant', text: 'Hi!' },
        { id: 'u2', parent: 'a1', role: 'user', text: 'Bye' },
        root,
        { id: 'u1', parent: 'root', role: 'user', text: 'Hello' },
      ], { current_node: 'u2' }),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['Hello', 'Hi!', 'Bye']);
    expect(c.warnings).toEqual([]);
  });

  it('follows current_node, not the newest or first leaf', () => {
    const c = convert(
      chatgptConversation(
        [
          root,
          { id: 'u1', parent: 'root', role: 'user', text: 'Q' },
          { id: 'a1', parent: 'u1', role: 'assistant', text: 'first answer' },
          { id: 'a2', parent: 'u1', role: 'assistant', text: 'second answer' },
        ],
        { current_node: 'a1' },
      ),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['Q', 'first answer']);
  });

  it('without current_node takes the newest leaf', () => {
    const raw = chatgptConversation([
      root,
      { id: 'u1', parent: 'root', role: 'user', text: 'Q' },
      { id: 'newer', parent: 'u1', role: 'assistant', text: 'newer answer', message: { create_time: 1_800_000_000 } },
      { id: 'older', parent: 'u1', role: 'assistant', text: 'older answer', message: { create_time: 1_600_000_000 } },
    ]);
    delete raw.current_node;
    expect(convert(raw).turns.map((t) => t.text)).toEqual(['Q', 'newer answer']);
  });

  it('with a current_node that is not in the mapping takes the newest leaf and says so', () => {
    const c = convert(
      chatgptConversation(
        [root, { id: 'u1', parent: 'root', role: 'user', text: 'Q' }, { id: 'a1', parent: 'u1', role: 'assistant', text: 'A' }],
        { current_node: 'gone' },
      ),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['Q', 'A']);
    expect(c.warnings.join('\n')).toMatch(/conversation conv-1 .*current_node gone is not in the mapping/);
  });

  it('stops at a cycle instead of looping', () => {
    const c = convert(
      chatgptConversation(
        [
          { id: 'u1', parent: 'a2', role: 'user', text: 'one' },
          { id: 'a1', parent: 'u1', role: 'assistant', text: 'two' },
          { id: 'u2', parent: 'a1', role: 'user', text: 'three' },
          { id: 'a2', parent: 'u2', role: 'assistant', text: 'four' },
        ],
        { current_node: 'a2' },
      ),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['one', 'two', 'three', 'four']);
    expect(c.warnings.join('\n')).toMatch(/cycle at node a2/);
  });

  it('stops at a missing parent and keeps what hangs below it', () => {
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u2', parent: 'ghost', role: 'user', text: 'orphan question' },
        { id: 'a2', parent: 'u2', role: 'assistant', text: 'orphan answer' },
      ]),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['orphan question', 'orphan answer']);
    expect(c.warnings.join('\n')).toMatch(/node u2 points to a missing parent ghost/);
  });
});

describe('ChatGPT message kinds', () => {
  it('skips visually hidden messages and empty placeholders', () => {
    const c = convert(
      chatgptConversation([
        root,
        { id: 's', parent: 'root', role: 'system', text: '', message: { metadata: { is_visually_hidden_from_conversation: true } } },
        { id: 'h', parent: 's', role: 'user', text: 'secret nudge', message: { metadata: { is_visually_hidden_from_conversation: true } } },
        { id: 'u1', parent: 'h', role: 'user', text: 'Hello' },
        { id: 'empty', parent: 'u1', role: 'assistant', content: { content_type: 'text', parts: [''] } },
        { id: 'a1', parent: 'empty', role: 'assistant', text: 'Hi' },
      ]),
    );
    expect(c.turns.map((t) => [t.role, t.text])).toEqual([
      ['user', 'Hello'],
      ['assistant', 'Hi'],
    ]);
  });

  it('keeps custom instructions as a hidden system turn', () => {
    const c = convert(
      chatgptConversation([
        root,
        {
          id: 'ctx',
          parent: 'root',
          role: 'user',
          content: {
            content_type: 'user_editable_context',
            user_profile: 'I am a Python developer.',
            user_instructions: 'Answer briefly.',
          },
          message: { metadata: { is_visually_hidden_from_conversation: true, user_context_message_data: {} } },
        },
        { id: 'mem', parent: 'ctx', role: 'system', content: { content_type: 'model_editable_context', model_set_context: 'Likes tea.' } },
        { id: 'u1', parent: 'mem', role: 'user', text: 'Hello' },
        { id: 'a1', parent: 'u1', role: 'assistant', text: 'Hi' },
      ]),
    );
    expect(roles(c)).toEqual(['system', 'system', 'user', 'assistant']);
    expect(c.turns[0]).toMatchObject({ role: 'system', hidden: true, text: 'I am a Python developer.\n\nAnswer briefly.' });
    expect(c.turns[1]).toMatchObject({ role: 'system', hidden: true, text: 'Likes tea.' });
    expect(c.turns[2]!.hidden).toBeUndefined();
  });

  it('turns code to a tool into an assistant tool call and execution_output into a tool turn', () => {
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u1', parent: 'root', role: 'user', text: 'What is 2**100?' },
        {
          id: 'call',
          parent: 'u1',
          role: 'assistant',
          content: { content_type: 'code', language: 'unknown', text: 'print(2**100)' },
          message: { recipient: 'python' },
        },
        {
          id: 'out',
          parent: 'call',
          role: 'tool',
          authorName: 'python',
          content: { content_type: 'execution_output', text: '1267650600228229401496703205376' },
        },
        { id: 'a1', parent: 'out', role: 'assistant', text: 'It is 1267650600228229401496703205376.' },
      ]),
    );
    expect(roles(c)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(c.turns[1]).toMatchObject({ text: '', toolCalls: [{ id: 'call', name: 'python', arguments: 'print(2**100)' }] });
    expect(c.turns[2]).toMatchObject({ role: 'tool', text: '1267650600228229401496703205376', toolName: 'python', toolCallId: 'call' });
    expect(c.turns[3]!.text).toBe('It is 1267650600228229401496703205376.');
  });

  it('makes browsing displays and quotes tool turns', () => {
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u1', parent: 'root', role: 'user', text: 'news?' },
        { id: 'call', parent: 'u1', role: 'assistant', content: { content_type: 'code', text: 'search("news")' }, message: { recipient: 'browser' } },
        { id: 'disp', parent: 'call', role: 'tool', authorName: 'browser', content: { content_type: 'tether_browsing_display', result: '# 【0†Headline†example.com】', summary: '' } },
        { id: 'quote', parent: 'disp', role: 'tool', authorName: 'browser', content: { content_type: 'tether_quote', url: 'https://example.com', domain: 'example.com', title: 'Headline', text: 'Body text' } },
        { id: 'a1', parent: 'quote', role: 'assistant', text: 'Here is the news.' },
      ]),
    );
    expect(roles(c)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
    expect(c.turns[3]!.text).toBe('Headline — https://example.com\nBody text');
  });

  it('keeps consecutive assistant messages as separate turns', () => {
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u1', parent: 'root', role: 'user', text: 'remember I like tea' },
        { id: 'bio', parent: 'u1', role: 'assistant', text: 'User likes tea.', message: { recipient: 'bio' } },
        { id: 'a1', parent: 'bio', role: 'assistant', text: 'Noted!' },
      ]),
    );
    expect(roles(c)).toEqual(['user', 'assistant', 'assistant']);
    expect(c.turns[1]!.toolCalls).toEqual([{ id: 'bio', name: 'bio', arguments: 'User likes tea.' }]);
  });

  it('puts reasoning on the next assistant turn, not in a turn of its own', () => {
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u1', parent: 'root', role: 'user', text: 'Hard question' },
        { id: 'th', parent: 'u1', role: 'assistant', content: { content_type: 'thoughts', thoughts: [{ summary: 'Plan', content: 'Think it through.' }] } },
        { id: 'recap', parent: 'th', role: 'assistant', content: { content_type: 'reasoning_recap', content: 'Thought for 4 seconds' } },
        { id: 'an', parent: 'recap', role: 'assistant', text: 'analysis text', message: { channel: 'analysis' } },
        { id: 'a1', parent: 'an', role: 'assistant', text: 'The answer.' },
      ]),
    );
    expect(roles(c)).toEqual(['user', 'assistant']);
    expect(c.turns[1]!.text).toBe('The answer.');
    expect(c.turns[1]!.reasoning).toBe('Plan\nThink it through.\n\nThought for 4 seconds\n\nanalysis text');
  });

  it('treats a part type named like an Object.prototype member as an unknown part (a file)', () => {
    const parts = [{ content_type: 'constructor', asset_pointer: 'sediment://file_y' }, 'See above.'];
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u1', parent: 'root', role: 'user', content: { content_type: 'multimodal_text', parts } },
        { id: 'a1', parent: 'u1', role: 'assistant', text: 'Seen.' },
      ]),
    );
    expect(c.turns[0]).toMatchObject({ text: '[file]\nSee above.', attachments: [{ kind: 'file', meta: { content_type: 'constructor', asset_pointer: 'sediment://file_y' } }] });
  });

  it('makes multimodal object parts placeholders with attachment metadata', () => {
    const c = convert(
      chatgptConversation([
        root,
        {
          id: 'u1',
          parent: 'root',
          role: 'user',
          content: {
            content_type: 'multimodal_text',
            parts: [
              { content_type: 'image_asset_pointer', asset_pointer: 'file-service://file-abc', size_bytes: 1234, width: 64, height: 48 },
              { content_type: 'some_new_pointer', asset_pointer: 'sediment://file_x' },
              'What is in this picture?',
            ],
          },
          message: {
            metadata: {
              attachments: [
                { id: 'file-abc', name: 'cat.png', mime_type: 'image/png', size: 1234 },
                { id: 'file-doc', name: 'notes.pdf', mime_type: 'application/pdf' },
              ],
            },
          },
        },
        { id: 'a1', parent: 'u1', role: 'assistant', text: 'A cat.' },
      ]),
    );
    const user = c.turns[0]!;
    expect(user.text).toBe('[image]\n[file]\nWhat is in this picture?');
    expect(user.attachments).toEqual([
      {
        kind: 'image',
        name: 'cat.png',
        mimeType: 'image/png',
        meta: { content_type: 'image_asset_pointer', asset_pointer: 'file-service://file-abc', size_bytes: 1234, width: 64, height: 48 },
      },
      { kind: 'file', meta: { content_type: 'some_new_pointer', asset_pointer: 'sediment://file_x' } },
      { kind: 'file', name: 'notes.pdf', mimeType: 'application/pdf', meta: { id: 'file-doc' } },
    ]);
  });

  it('uses the transcript of a voice message as its text, keeping the audio as an attachment', () => {
    const c = convert(
      chatgptConversation([
        root,
        {
          id: 'u1',
          parent: 'root',
          role: 'user',
          content: {
            content_type: 'multimodal_text',
            parts: [
              { content_type: 'audio_transcription', text: 'What time is it in Tokyo?', direction: 'in' },
              { content_type: 'audio_asset_pointer', asset_pointer: 'sediment://file_audio', size_bytes: 9000 },
            ],
          },
        },
      ]),
    );
    expect(c.turns[0]!.text).toBe('What time is it in Tokyo?');
    expect(c.turns[0]!.attachments).toEqual([
      { kind: 'audio', meta: { content_type: 'audio_asset_pointer', asset_pointer: 'sediment://file_audio', size_bytes: 9000 } },
    ]);
  });

  it('strips private-use and 【…†…】 citation markers from the text and keeps them as citations', () => {
    const marker = '\ue200cite\ue202turn0search1\ue201';
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u1', parent: 'root', role: 'user', text: 'Capital of France?' },
        {
          id: 'a1',
          parent: 'u1',
          role: 'assistant',
          text: `Paris is the capital ${marker}. Older sources agree 【3†source】 too.\ue203Highlighted\ue204 end.`,
          message: {
            metadata: {
              content_references: [{ matched_text: marker, type: 'grouped_webpages', items: [{ url: 'https://fr.example', title: 'France' }] }],
            },
          },
        },
      ]),
    );
    const reply = c.turns[1]!;
    expect(reply.text).toBe('Paris is the capital. Older sources agree too.Highlighted end.');
    expect(reply.text).not.toMatch(/[\ue200-\ue2ff【】]/);
    expect(reply.citations).toEqual([
      { marker, url: 'https://fr.example', title: 'France' },
      { marker: '【3†source】' },
    ]);
  });

  it('keeps the text of an unknown content type, and skips a textless one with a counted warning', () => {
    const c = convert(
      chatgptConversation([
        root,
        { id: 'u1', parent: 'root', role: 'user', text: 'Q' },
        { id: 'w1', parent: 'u1', role: 'assistant', content: { content_type: 'fancy_widget', widget: { x: 1 } } },
        { id: 'w2', parent: 'w1', role: 'assistant', content: { content_type: 'fancy_widget', widget: { x: 2 } } },
        { id: 'a1', parent: 'w2', role: 'assistant', content: { content_type: 'new_text_kind', text: 'still readable' } },
      ]),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['Q', 'still readable']);
    expect(c.warnings).toEqual([
      'conversation conv-1 “Test conversation” (conversation #1): 2 messages of unknown content type "fancy_widget" with no text skipped',
    ]);
  });
});

describe('ChatGPT branch alternatives', () => {
  it('keeps regenerated assistant siblings as alternatives of the kept reply', () => {
    const c = convert(
      chatgptConversation(
        [
          root,
          { id: 'u1', parent: 'root', role: 'user', text: 'Write a poem' },
          { id: 'old', parent: 'u1', role: 'assistant', text: 'Roses are red' },
          { id: 'stopped', parent: 'u1', role: 'assistant', text: 'Once upon', message: { status: 'in_progress' } },
          { id: 'kept', parent: 'u1', role: 'assistant', text: 'The sea at dawn' },
          { id: 'u2', parent: 'kept', role: 'user', text: 'Lovely' },
          // An edited user message: its reply has no kept sibling, so it is no alternative.
          { id: 'u2b', parent: 'kept', role: 'user', text: 'Meh' },
          { id: 'a2b', parent: 'u2b', role: 'assistant', text: 'Sorry' },
          { id: 'a2', parent: 'u2', role: 'assistant', text: 'Thanks!' },
        ],
        { current_node: 'a2' },
      ),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['Write a poem', 'The sea at dawn', 'Lovely', 'Thanks!']);
    expect(c.alternatives).toEqual([
      { atTurn: 1, turn: { role: 'assistant', text: 'Roses are red', timestamp: 1_700_000_002, externalId: 'old' } },
      { atTurn: 1, turn: { role: 'assistant', text: 'Once upon', timestamp: 1_700_000_003, externalId: 'stopped', status: 'in_progress' } },
    ]);
  });

  it('pairs reasoning-model regenerations by their first reply, reasoning included', () => {
    const c = convert(
      chatgptConversation(
        [
          root,
          { id: 'u1', parent: 'root', role: 'user', text: 'Q' },
          { id: 'th-old', parent: 'u1', role: 'assistant', content: { content_type: 'thoughts', thoughts: [{ summary: 's', content: 'old thinking' }] } },
          { id: 'a-old', parent: 'th-old', role: 'assistant', text: 'old answer' },
          { id: 'th-new', parent: 'u1', role: 'assistant', content: { content_type: 'thoughts', thoughts: [{ summary: 's', content: 'new thinking' }] } },
          { id: 'a-new', parent: 'th-new', role: 'assistant', text: 'new answer' },
        ],
        { current_node: 'a-new' },
      ),
    );
    expect(c.turns.map((t) => t.text)).toEqual(['Q', 'new answer']);
    expect(c.alternatives).toHaveLength(1);
    expect(c.alternatives[0]).toMatchObject({ atTurn: 1, turn: { text: 'old answer', reasoning: 's\nold thinking' } });
  });
});

describe('ChatGPT files', () => {
  const dir = tempDir();

  it('skips a conversation without mapping, naming it, and imports the rest', async () => {
    const good = chatgptConversation([root, { id: 'u1', parent: 'root', role: 'user', text: 'Q' }, { id: 'a1', parent: 'u1', role: 'assistant', text: 'A' }]);
    const noMapping = { title: 'Broken one', conversation_id: 'conv-broken', current_node: 'x' };
    const badMapping = { title: 'Bad mapping', id: 'conv-bad', mapping: [1, 2] };
    const file = writeJson(dir, 'conversations.json', [noMapping, good, badMapping, 42]);
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('chatgpt');
    expect(conversations.map((c) => c.externalId)).toEqual(['conv-1']);
    expect(opened.warnings).toEqual([
      `${file}: conversation conv-broken “Broken one” (conversation #1) skipped: it has no "mapping" (the message tree)`,
      `${file}: conversation conv-bad “Bad mapping” (conversation #3) skipped: its "mapping" is not an object`,
      `${file}: conversation #4 skipped: it is not a JSON object`,
    ]);
  });

  it('skips a conversation with nothing visible in it', async () => {
    const hiddenOnly = chatgptConversation([
      root,
      { id: 's', parent: 'root', role: 'system', text: '', message: { metadata: { is_visually_hidden_from_conversation: true } } },
    ]);
    const file = writeJson(dir, 'hidden-only.json', [hiddenOnly]);
    const { opened, conversations } = await importAll(file);
    expect(conversations).toEqual([]);
    expect(opened.warnings).toEqual([`${file}: conversation conv-1 “Test conversation” (conversation #1) skipped: it has no messages to import`]);
  });

  it('copies per-conversation warnings into the export warnings, prefixed with the file', async () => {
    const raw = chatgptConversation([root, { id: 'u1', parent: 'root', role: 'user', text: 'Q' }, { id: 'w', parent: 'u1', role: 'assistant', content: { content_type: 'mystery' } }]);
    const file = writeJson(dir, 'unknown-type.json', [raw]);
    const { opened, conversations } = await importAll(file);
    expect(conversations[0]!.warnings).toHaveLength(1);
    expect(opened.warnings).toEqual([`${file}: ${conversations[0]!.warnings[0]}`]);
    expect(opened.warnings[0]).toMatch(/1 message of unknown content type "mystery" with no text skipped/);
  });
});

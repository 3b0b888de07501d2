// Every shared sample export imports, with the turns worked out by hand from the files.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { importAll, roles } from './helpers.js';

const SAMPLES = new URL('../../../shared/samples/', import.meta.url).pathname;

describe('shared sample exports', () => {
  it('chatgpt-tree-branches.json: active branch, hidden system skipped, one regenerated sibling', async () => {
    const file = SAMPLES + 'chatgpt-tree-branches.json';
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('chatgpt');
    expect(opened.sha256).toBe(createHash('sha256').update(readFileSync(file)).digest('hex'));
    expect(conversations).toHaveLength(1);
    const [c] = conversations;
    expect(c!.externalId).toBe('d5dc5307-6807-41a0-8b04-4acee626eeb7');
    expect(c!.title).toBe('Assist user with summary');
    expect(c!.createdAt).toBeCloseTo(1714585031.148505, 5);
    // current_node f63b8e17 → … → the edited branch "hi again"; the root (not the first key) and
    // the hidden empty system message give no turns; the "so cool bro" branch is abandoned.
    expect(roles(c!)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
    expect(c!.turns.map((t) => t.text.slice(0, 14))).toEqual([
      'hi there',
      'Hello! How can',
      'hi again',
      "Hey! Welcome b",
      'tell me a joke',
      "Sure, here's o",
    ]);
    expect(c!.turns[5]!.externalId).toBe('f63b8e17-aa5c-4ca6-a1bf-d4d285e269b8');
    // The joke was regenerated: d0d2a7df is the abandoned sibling of the kept reply (turn 5).
    // The interrupted story (ada93f81) hangs under the abandoned "so cool bro" branch: no kept
    // sibling, so no alternative.
    expect(c!.alternatives).toHaveLength(1);
    expect(c!.alternatives[0]!.atTurn).toBe(5);
    expect(c!.alternatives[0]!.turn.externalId).toBe('d0d2a7df-d2fc-4df9-bf0a-1c5121e227ae');
    expect(c!.alternatives[0]!.turn.role).toBe('assistant');
    expect(opened.warnings).toEqual([]);
  });

  it('claude-thinking.json: thinking is reasoning, not reply text', async () => {
    const { opened, conversations } = await importAll(SAMPLES + 'claude-thinking.json');
    expect(opened.format).toBe('claude');
    expect(conversations).toHaveLength(1);
    const [c] = conversations;
    expect(c!.externalId).toBe('11111111-2222-3333-4444-555555555555');
    expect(c!.title).toBe('Thinking Demo');
    expect(c!.createdAt).toBe(Date.parse('2025-01-01T00:00:00Z') / 1000);
    expect(roles(c!)).toEqual(['user', 'assistant']);
    expect(c!.turns[0]!.text).toBe('Can you greet me?');
    expect(c!.turns[1]!.text).toBe("Hello there! It's great to hear from you.");
    expect(c!.turns[1]!.reasoning).toMatch(/^The user asked for a greeting/);
    expect(c!.turns[1]!.timestamp).toBe(Date.parse('2025-01-01T00:00:05Z') / 1000);
  });

  it('sharegpt-conversation.json: a single ShareGPT object', async () => {
    const { opened, conversations } = await importAll(SAMPLES + 'sharegpt-conversation.json');
    expect(opened.format).toBe('sharegpt');
    expect(conversations).toHaveLength(1);
    const c = conversations[0]!;
    expect(c.turns).toHaveLength(12);
    expect(roles(c)).toEqual(Array.from({ length: 12 }, (_, i) => (i % 2 ? 'assistant' : 'user')));
    expect(c.externalId).toBeUndefined();
    expect(c.turns[0]!.text).toMatch(/^how could i implement a minesweeper algorithm/);
  });

  it('hf-messages-images.json: six conversations, <image> tokens become placeholders', async () => {
    const { opened, conversations } = await importAll(SAMPLES + 'hf-messages-images.json');
    expect(opened.format).toBe('messages');
    expect(conversations).toHaveLength(6);
    for (const c of conversations) expect(roles(c)).toEqual(['user', 'assistant', 'user', 'assistant']);
    const first = conversations[0]!;
    expect(first.turns[0]!.text).toBe('[image]Who are they?');
    expect(first.turns[2]!.text).toBe('What are they doing?[image]');
    expect(first.turns[0]!.attachments).toEqual([{ kind: 'image', name: 'mllm_demo_data/1.jpg' }]);
    const placeholders = conversations.map((c) => c.turns.flatMap((t) => t.attachments ?? []).length);
    expect(placeholders).toEqual([2, 1, 1, 2, 1, 1]);
    expect(conversations.flatMap((c) => c.turns).some((t) => t.text.includes('<image>'))).toBe(false);
  });
});

// Every fixture export under test/fixtures/ imports, with the turns worked out by hand from the
// files. The fixtures are the project's own (see test/fixtures/README.md); the same checks over
// the shared sample exports beside the repository are in test/conformance/.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { importAll, roles } from './helpers.js';

const FIXTURES = new URL('../fixtures/', import.meta.url).pathname;

describe('fixture exports', () => {
  it('chatgpt-branches.json: active branch, hidden system skipped, one regenerated sibling', async () => {
    const file = FIXTURES + 'chatgpt-branches.json';
    const { opened, conversations } = await importAll(file);
    expect(opened.format).toBe('chatgpt');
    expect(opened.sha256).toBe(createHash('sha256').update(readFileSync(file)).digest('hex'));
    expect(conversations).toHaveLength(1);
    const [c] = conversations;
    expect(c!.externalId).toBe('6a1f0c2e-fixture-chatgpt-branches');
    expect(c!.title).toBe('Snake plant care');
    expect(c!.createdAt).toBeCloseTo(1_717_999_999.75, 5);
    // current_node a3 → … → the edited branch "Thanks! And how much light…"; the root (not the
    // first key) and the hidden empty system message give no turns; the "And in winter?"
    // branch is abandoned.
    expect(roles(c!)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
    expect(c!.turns.map((t) => t.text.slice(0, 14))).toEqual([
      'How often shou',
      'About every tw',
      'Thanks! And ho',
      'It copes with ',
      'What pot size ',
      'Pick a pot abo',
    ]);
    expect(c!.turns[5]!.externalId).toBe('a3');
    // The pot answer was regenerated: a3-first is the abandoned sibling of the kept reply (turn
    // 5), with its own text. The interrupted cactus answer (a3-old) hangs under the abandoned
    // "And in winter?" branch: no kept sibling, so no alternative.
    expect(c!.alternatives).toHaveLength(1);
    expect(c!.alternatives[0]!.atTurn).toBe(5);
    expect(c!.alternatives[0]!.turn).toMatchObject({ externalId: 'a3-first', role: 'assistant', text: 'Any pot will do.' });
    expect(opened.warnings).toEqual([]);
  });

  it('claude-thinking.json: thinking is reasoning, not reply text', async () => {
    const { opened, conversations } = await importAll(FIXTURES + 'claude-thinking.json');
    expect(opened.format).toBe('claude');
    expect(conversations).toHaveLength(1);
    const [c] = conversations;
    expect(c!.externalId).toBe('c0ffee00-0000-4000-8000-fixture00001');
    expect(c!.title).toBe('A prime above 100');
    expect(c!.createdAt).toBe(Date.parse('2025-03-01T09:00:00Z') / 1000);
    expect(roles(c!)).toEqual(['user', 'assistant']);
    expect(c!.turns[0]!.text).toBe('Can you name a prime number larger than 100?');
    expect(c!.turns[1]!.text).toBe('101 is prime: no whole number between 2 and 10 divides it.');
    expect(c!.turns[1]!.reasoning).toMatch(/^The user wants one prime above 100/);
    expect(c!.turns[1]!.timestamp).toBe(Date.parse('2025-03-01T09:00:07Z') / 1000);
  });

  it('sharegpt-single.json: a single ShareGPT object', async () => {
    const { opened, conversations } = await importAll(FIXTURES + 'sharegpt-single.json');
    expect(opened.format).toBe('sharegpt');
    expect(conversations).toHaveLength(1);
    const c = conversations[0]!;
    expect(c.turns).toHaveLength(12);
    expect(roles(c)).toEqual(Array.from({ length: 12 }, (_, i) => (i % 2 ? 'assistant' : 'user')));
    expect(c.externalId).toBeUndefined();
    expect(c.turns[0]!.text).toMatch(/^I want to learn chess openings/);
  });

  it('hf-messages-images.json: three conversations, <image> tokens become placeholders', async () => {
    const { opened, conversations } = await importAll(FIXTURES + 'hf-messages-images.json');
    expect(opened.format).toBe('messages');
    expect(conversations).toHaveLength(3);
    for (const c of conversations) expect(roles(c)).toEqual(['user', 'assistant', 'user', 'assistant']);
    const first = conversations[0]!;
    expect(first.turns[0]!.text).toBe('[image]What bird is this?');
    expect(first.turns[2]!.text).toBe('And this one?[image]');
    expect(first.turns[0]!.attachments).toEqual([{ kind: 'image', name: 'birds/robin.jpg' }]);
    const placeholders = conversations.map((c) => c.turns.flatMap((t) => t.attachments ?? []).length);
    expect(placeholders).toEqual([2, 1, 2]);
    expect(conversations.flatMap((c) => c.turns).some((t) => t.text.includes('<image>'))).toBe(false);
  });

  it('openai-chat.jsonl: a tool call answered by its tool, then a chat without reaction', async () => {
    const { opened, conversations } = await importAll(FIXTURES + 'openai-chat.jsonl');
    expect(opened.format).toBe('openai');
    expect(conversations.map(roles)).toEqual([
      ['system', 'user', 'assistant', 'tool', 'assistant', 'user'],
      ['user', 'assistant'],
    ]);
    const [c] = conversations;
    expect(c!.turns[2]!.toolCalls).toEqual([{ id: 'call_route', name: 'route_distance', arguments: '{"from":"Lyon","to":"Geneva"}' }]);
    expect(c!.turns[3]).toMatchObject({ role: 'tool', text: '{"km": 150}', toolCallId: 'call_route', toolName: 'route_distance' });
  });

  it('openwebui-regenerated.json: the regenerated reply is an alternative of the kept one', async () => {
    const { opened, conversations } = await importAll(FIXTURES + 'openwebui-regenerated.json');
    expect(opened.format).toBe('openwebui');
    const [c] = conversations;
    expect(roles(c!)).toEqual(['user', 'assistant', 'user']);
    expect(c!.turns[1]!.text).toMatch(/^Grey roofs drum softly/);
    expect(c!.alternatives).toEqual([{ atTurn: 1, turn: expect.objectContaining({ externalId: 'm2', text: 'Rain is wet. It falls down. The end.' }) }]);
  });
});

// The tools a conversation offered, as training and exports read them (src-shared/offered-tools.ts):
// every form a source keeps them in becomes OpenAI's list, and a session's samples carry it.
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { offeredTools } from '../../src-shared/offered-tools.js';
import { conv, fakeExport, tempWorkspace, trainOnEverySession, type TurnSpec } from '../store/helpers.js';

const WEATHER = { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } };
const OPENAI = [{ type: 'function', function: WEATHER }];

describe('offeredTools', () => {
  it('reads OpenAI\'s list, bare definitions (ShareGPT), the Responses API\'s flat form and a JSON string of any of them', () => {
    expect(offeredTools(OPENAI)).toEqual(OPENAI);
    expect(offeredTools([WEATHER])).toEqual(OPENAI);
    expect(offeredTools([{ type: 'function', ...WEATHER }])).toEqual(OPENAI);
    expect(offeredTools(JSON.stringify([WEATHER]))).toEqual(OPENAI);
  });

  it('leaves out entries without a function name and reads nothing usable as null', () => {
    expect(offeredTools([{ type: 'code_interpreter' }, { function: { description: 'no name' } }, 7, null, WEATHER])).toEqual(OPENAI);
    for (const nothing of [undefined, null, 'not json', '{"a":1}', {}, [], [{ type: 'web_search' }]]) expect(offeredTools(nothing)).toBeNull();
  });
});

describe('a session\'s tools reach its samples', () => {
  let dir = '';
  afterAll(() => dir && fs.rmSync(dir, { recursive: true, force: true }));

  it('from the metadata an import kept, in any form; a session without tools has none', async () => {
    const opened = await tempWorkspace();
    dir = opened.dir;
    const { ws } = opened;
    const turns: TurnSpec[] = [['user', 'Weather in Oslo?'], ['assistant', 'Cold.'], ['user', 'Thanks!']];
    await ws.importExport(fakeExport('x.jsonl', [
      conv('listed', turns, { createdAt: 1, metadata: { tools: OPENAI } }),
      conv('sharegpt', turns, { createdAt: 2, metadata: { tools: JSON.stringify([WEATHER]) } }),
      conv('none', turns, { createdAt: 3 }),
    ]));
    trainOnEverySession(ws);
    for (const s of ['openai:listed', 'openai:sharegpt', 'openai:none']) ws.setLabel(s, 1, { reward: 1 });
    const bySession = Object.fromEntries(ws.trainingSamples().map((s) => [s.sessionId, s.tools ?? null]));
    expect(bySession).toEqual({ 'openai:listed': OPENAI, 'openai:sharegpt': OPENAI, 'openai:none': null });
    ws.close();
  });

  it('a reply written while another list was offered (toolsByTurn, from live capture) trains and exports with that list', async () => {
    const opened = await tempWorkspace();
    const { ws } = opened;
    const SEARCH = [{ type: 'function', function: { name: 'search', parameters: { type: 'object', properties: {} } } }];
    const turns: TurnSpec[] = [['user', 'Weather in Oslo?'], ['assistant', 'Cold.'], ['user', 'Search the news.'], ['assistant', 'Nothing new.'], ['user', 'Thanks!']];
    // Turn 1 was written with no tools offered, turn 3 with the latest list.
    await ws.importExport(fakeExport('z.jsonl', [conv('changed', turns, { createdAt: 1, metadata: { tools: SEARCH, toolsByTurn: { 1: [] } } })]));
    trainOnEverySession(ws);
    for (const turn of [1, 3]) ws.setLabel('openai:changed', turn, { reward: 1 });
    expect(ws.trainingSamples().map((s) => [s.responseTurn, s.tools ?? null])).toEqual([[1, null], [3, SEARCH]]);
    const lines = ws.previewExport('samples', 10).map((l) => JSON.parse(l) as { response_turn: number; tools?: unknown });
    expect(lines.map((l) => [l.response_turn, l.tools ?? null])).toEqual([[1, null], [3, SEARCH]]);
    ws.close();
    fs.rmSync(opened.dir, { recursive: true, force: true });
  });

  it('Checks counts the replies that call tools their conversation never defined (their calls do not train)', async () => {
    const opened = await tempWorkspace();
    const { ws } = opened;
    const calling: TurnSpec[] = [
      ['user', 'Weather in Oslo?'], { role: 'assistant', text: 'Let me look.', toolCalls: [{ id: 'c1', name: 'get_weather', arguments: '{"city":"Oslo"}' }] },
      { role: 'tool', text: '-3°C', toolCallId: 'c1' }, ['assistant', 'Cold.'], ['user', 'Thanks!'],
    ];
    await ws.importExport(fakeExport('y.jsonl', [
      conv('defined', calling, { createdAt: 1, metadata: { tools: OPENAI } }),
      conv('undefined', calling, { createdAt: 2 }),
      // defined later: the call was written while none were offered (a capture's toolsByTurn)
      conv('defined-later', calling, { createdAt: 3, metadata: { tools: OPENAI, toolsByTurn: { 1: [] } } }),
    ]));
    expect(ws.checks().warnings).toContain("2 replies call tools the conversation never defined (ChatGPT's and Claude's built-in web search and code): the text trains, the calls do not.");
    ws.close();
    fs.rmSync(opened.dir, { recursive: true, force: true });
  });
});

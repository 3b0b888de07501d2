// A database context whose session offered tools (docs/design.md §Tools offered): the on-policy
// rollout sees the conversation as the model did (its past calls, the tools' results, the tools
// themselves), never runs those tools (they are the user's own), and ends a reply that calls one
// with the calls as its answer; the replay judge and the OPD teacher see the same. A scripted
// policy on Qwen3's real tokenizer and template drives the real rollout manager.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TrainingSample } from '../../src-shared/views.js';
import { sampleContextLines, stepContexts, teacherPromptIds } from '../../src-main/onpolicy/contexts.js';
import { NOT_RUN, runRollouts } from '../../src-main/rollout/manager.js';
import { ToolRegistry } from '../../src-main/rollout/tools.js';
import { writeRealTinyModel } from '../../tools/real-tokenizers.js';
import { ScriptedPolicy } from '../rollout/scripted-policy.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-recorded-tools-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
const model = writeRealTinyModel(path.join(root, 'qwen3'), 'qwen3', { family: 'qwen3' });
const tok = model.tokenizer;

const TOOLS = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const CALL = { id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
/** The reply after the tool's result, labelled −1 with a hint. */
const SAMPLE: TrainingSample = {
  sessionId: 'agent', responseTurn: 3,
  messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [CALL] },
    { role: 'tool', content: '18°C', tool_call_id: 'call_1', name: 'get_weather' },
  ],
  response: { role: 'assistant', content: 'It is 64°F.' }, tools: TOOLS,
  reward: -1, hint: 'Give it in Celsius, as the tool did.', repair: null, keptByAtLeastOne: false,
};
const CALLING = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>';

describe('a context of a session that offered tools', () => {
  const { lines } = sampleContextLines([SAMPLE], 'combine', true, tok, 2048);
  const [context] = stepContexts(lines, new ToolRegistry([]), 'contexts.jsonl');

  it('keeps the past calls, the results\' ids and the tools; the judge reads the calls', () => {
    const sample = (lines[0] as { sample: { messages: unknown[]; tools?: unknown } }).sample;
    expect(sample.messages[1]).toEqual({ role: 'assistant', content: '', tool_calls: [CALL] });
    expect(sample.messages[2]).toEqual({ role: 'tool', name: 'get_weather', content: '18°C', tool_call_id: 'call_1' });
    expect(context!.rollout).toMatchObject({ tools: TOOLS, recordedTools: true });
    expect(context!.judgeInput!.context[1]!.tool_calls).toEqual([CALL]);
  });

  it('is prompted as the model was, tools included; a reply that calls one ends there, the call not run', async () => {
    const policy = new ScriptedPolicy(tok, () => CALLING);
    const [episode] = await runRollouts(policy, [context!.rollout], { tools: new ToolRegistry([]), rollouts: 1, maxTurns: 4, maxTokens: 200 });
    const prompt = tok.decode(policy.batches[0]![0]!.promptIds, false);
    expect(prompt).toBe(tok.applyChatTemplate(SAMPLE.messages, { tools: TOOLS, addGenerationPrompt: true }));
    expect(prompt).toContain('<tools>');
    expect(prompt).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>');
    expect(policy.batches).toHaveLength(1); // no second turn: nothing ran
    expect(episode).toMatchObject({ finish: 'answer', summary: { turns: 1, toolCalls: 1 } });
    expect(episode!.messages.at(-1)).toMatchObject({ role: 'assistant', toolCalls: [{ name: 'get_weather', arguments: { city: 'Lyon' }, ok: false, result: NOT_RUN, notRun: true }] });
  });

  it('the OPD teacher\'s prompt offers the same tools, with the hint', () => {
    const teacher = tok.decode(teacherPromptIds(tok, context!), false);
    expect(teacher).toContain('<tools>');
    expect(teacher).toContain('Give it in Celsius');
  });
});

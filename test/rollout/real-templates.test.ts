// Tool turns through the published chat templates of Qwen3, Qwen2.5, Llama 3.2 and Mistral Nemo
// (tools/real-tokenizers.ts): the generated reply's tokens stay as they were, the tool turn
// between two replies is exactly what the template writes there (Qwen's <tool_response> user
// turn, Llama's ipython turn, Mistral's [TOOL_RESULTS] with the call's 9-character id) and ends
// with the generation prompt, whatever the template does to the beginning of the last reply
// (Qwen3's empty think block). Qwen writes its call as a Hermes block, Mistral after its
// [TOOL_CALLS] token, Llama 3.2 as the bare JSON its template asks for.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { runRollouts } from '../../src-main/rollout/manager.js';
import { ToolRegistry } from '../../src-main/rollout/tools.js';
import { builtinTools } from '../../src-main/rollout/builtin-tools.js';
import { writeRealTokenizer, type RealTokenizer } from '../../tools/real-tokenizers.js';
import { ScriptedPolicy } from './scripted-policy.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-rollout-tpl-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17 * 23"}}\n</tool_call>';

const CASES: { name: RealTokenizer; end: string; toolTurn: string; call?: string }[] = [
  { name: 'qwen3', end: '<|im_end|>', toolTurn: '\n<|im_start|>user\n<tool_response>\n391\n</tool_response><|im_end|>\n<|im_start|>assistant\n' },
  { name: 'qwen2.5', end: '<|im_end|>', toolTurn: '\n<|im_start|>user\n<tool_response>\n391\n</tool_response><|im_end|>\n<|im_start|>assistant\n' },
  {
    name: 'llama3.2', end: '<|eot_id|>', toolTurn: '<|start_header_id|>ipython<|end_header_id|>\n\n"391"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    call: '{"name": "calculator", "parameters": {"expression": "17 * 23"}}',
  },
  {
    name: 'mistral-nemo', end: '</s>', toolTurn: '[TOOL_RESULTS]{"content": 391, "call_id": "call00000"}[/TOOL_RESULTS]',
    call: '[TOOL_CALLS][{"name": "calculator", "arguments": {"expression": "17 * 23"}}]',
  },
];

describe.each(CASES)('tool turns with the $name template', ({ name, end, toolTurn, call = CALL }) => {
  it('appends what the template writes between the call and the answer, and keeps the replies as generated', async () => {
    const tok = ChatTokenizer.load(writeRealTokenizer(path.join(root, name), name));
    const policy = new ScriptedPolicy(tok, (prompt) => (prompt.includes('391') ? 'It is 391.' : call), 4096, end);
    const [e] = await runRollouts(policy, [{ id: 'q', messages: [{ role: 'user', content: 'What is 17 times 23?' }] }], {
      tools: new ToolRegistry(builtinTools()), rollouts: 1,
    });
    expect(e!.finish).toBe('answer');
    expect(e!.messages[1]).toMatchObject({ role: 'assistant', toolCalls: [{ name: 'calculator', ok: true, result: '391' }] });
    const { inputIds, generated } = e!.tokens;
    const endId = tok.tokenToId(end)!;
    expect(inputIds.slice(generated[0]!.start, generated[0]!.end)).toEqual([...tok.encode(call), endId]);
    expect(inputIds.slice(generated[1]!.start, generated[1]!.end)).toEqual([...tok.encode('It is 391.'), endId]);
    expect(tok.decode(inputIds.slice(generated[0]!.end, generated[1]!.start), false)).toBe(toolTurn);
    // The prompt shows the model its tools, as the template writes them.
    expect(tok.decode(inputIds.slice(0, e!.tokens.promptLength), false)).toContain('calculator');
  });
});

// Training rows: the database's samples through the chat template (at-least-one and combine
// rules, teacher alignment), --data validation, truncation, padding, step order, advantages,
// and checkpoints.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { seededRandom } from '../../src-main/model/sampling.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { HINT_PREFIX } from '../../src-main/pipeline/hint-context.js';
import { fillAdvantages } from '../../src-main/train/advantages.js';
import { fitRow, padBatch, rowsForStep, rowsFromSamples, type TrainRow } from '../../src-main/train/batches.js';
import { rowsFromJsonl } from '../../src-main/train/data-lines.js';
import { findCheckpoint, loadCheckpoint, saveCheckpoint } from '../../src-main/train/run-checkpoint.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { SESSION_001, SORTING, conv, fakeExport, tempWorkspace, trainOnEverySession } from '../store/helpers.js';

let tmp: string;
let modelDir: string;
let tokenizer: ChatTokenizer;
let samples: TrainingSample[];

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-batches-'));
  modelDir = writeTinyModel(path.join(tmp, 'model'), { family: 'qwen3', numLayers: 1 }).dir;
  tokenizer = ChatTokenizer.load(modelDir);
  const { ws } = await tempWorkspace();
  await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING, { createdAt: 1 }), conv('s1', SESSION_001, { createdAt: 2 })]));
  trainOnEverySession(ws);
  ws.setLabel('openai:sort', 2, { reward: -1, hint: 'Write it in Python, as the user asked.' }); // ±1 and a hint
  ws.setLabel('openai:sort', 4, { reward: 0, hint: 'Name the parameter reverse, like sorted() does.' }); // hint, no ±1
  ws.setLabel('openai:sort', 6, { reward: 1 }); // ±1, no hint
  ws.setLabel('openai:s1', 2, { reward: 0 }); // a session whose every label is 0
  ws.setLabel('openai:s1', 4, { reward: 0 });
  samples = ws.trainingSamples();
  ws.close();
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const origins = (rows: TrainRow[]) => rows.map((r) => r.origin);

describe('rows from the database', () => {
  it('rl keeps ±1 samples and the at-least-one sample (reward 0), and no teacher', () => {
    const set = rowsFromSamples(samples, tokenizer, 'rl', 512);
    expect(origins(set.rows)).toEqual(['openai:sort/2', 'openai:sort/6', 'openai:s1/2']);
    expect(set.rows.map((r) => [r.reward, !!r.kept, !!r.teacher])).toEqual([[-1, false, false], [1, false, false], [0, true, false]]);
    expect(set.skipped).toEqual({ 'no ±1 reward': 1 });
  });

  const withTemplate = (name: string, template: string) => {
    const dir = writeTinyModel(path.join(tmp, name), { family: 'qwen3', numLayers: 1 }).dir;
    const configPath = path.join(dir, 'tokenizer_config.json');
    fs.writeFileSync(configPath, JSON.stringify({ ...JSON.parse(fs.readFileSync(configPath, 'utf8')), chat_template: template }));
    return ChatTokenizer.load(dir);
  };

  it('a sample the chat template cannot place after its prompt is skipped and counted, not fatal', () => {
    // The generation prompt names another role than the rendered reply: no reply continues it.
    const tok = withTemplate('other-role-model',
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
      "{% if add_generation_prompt %}<|im_start|>bot\n{% endif %}");
    const set = rowsFromSamples(samples, tok, 'rl', 512);
    expect(set.rows).toEqual([]);
    expect(set.skipped).toEqual({ 'no ±1 reward': 1, 'the chat template does not place the reply after its prompt': 3 });
  });

  it("a conversation the template refuses (raise_exception, as Mistral's do) is skipped under the template's own words", () => {
    const tok = withTemplate('refusing-model',
      "{% if messages | length > 3 %}{{ raise_exception('Only short chats, please!') }}{% endif %}" +
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    const set = rowsFromSamples(samples, tok, 'rl', 512); // sort/6 has 6 messages before its reply
    expect(origins(set.rows)).toEqual(['openai:sort/2', 'openai:s1/2']);
    expect(set.skipped).toEqual({ 'no ±1 reward': 1, 'the chat template refuses the conversation: Only short chats, please!': 1 });
  });

  it('DeepSeek-R1 style (the generation prompt opens <think>): the reply span starts where the prompt ends', () => {
    const tok = withTemplate('think-model',
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
      "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}");
    const set = rowsFromSamples(samples, tok, 'rl', 512);
    expect(set.skipped).toEqual({ 'no ±1 reward': 1 });
    expect(set.rows).toHaveLength(3);
    const row = set.rows[0]!;
    expect(tok.decode(row.inputIds.slice(0, row.responseStart), false).endsWith('<|im_start|>assistant\n<think>\n')).toBe(true);
    // A reply without reasoning closes an empty think block, then ends its turn.
    expect(tok.decode(row.inputIds.slice(row.responseStart), false)).toBe(`\n</think>\n\n${samples[0]!.response.content}<|im_end|>\n`);
  });

  /** samples[0] as a reply that calls a tool (after its text), in a session that offered the tool. */
  const CALL = { id: 'call_1', type: 'function' as const, function: { name: 'run_python', arguments: '{"code":"sorted(xs)"}' } };
  const TOOL = { type: 'function' as const, function: { name: 'run_python', parameters: { type: 'object' } } };
  const callingSample = (content: string): TrainingSample => ({ ...samples[0]!, response: { ...samples[0]!.response, content, tool_calls: [CALL] }, tools: [TOOL] });
  const TOOLS_TEMPLATE =
    "{% if tools %}<|im_start|>system\nTools: {% for t in tools %}{{ t.function.name }} {% endfor %}<|im_end|>\n{% endif %}" +
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{% for c in m.tool_calls or [] %}<call>{{ c.function.name }} {{ c.function.arguments | tojson }}</call>{% endfor %}<|im_end|>\n{% endfor %}" +
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

  it('a reply that calls tools trains as the template writes the calls, after a prompt that offers the tools', () => {
    const tok = withTemplate('tools-model', TOOLS_TEMPLATE);
    for (const content of ['', 'Let me run it.']) {
      const set = rowsFromSamples([callingSample(content)], tok, 'rl', 512);
      expect(set.skipped).toEqual({});
      const row = set.rows[0]!;
      expect(tok.decode(row.inputIds.slice(0, row.responseStart), false)).toMatch(/^<\|im_start\|>system\nTools: run_python <\|im_end\|>\n[\s\S]*<\|im_start\|>assistant\n$/);
      expect(tok.decode(row.inputIds.slice(row.responseStart), false)).toBe(`${content}<call>run_python {"code": "sorted(xs)"}</call><|im_end|>\n`);
    }
  });

  it('a call to a tool the conversation did not offer (an export without the definitions) is left out of the reply that trains', () => {
    const tok = withTemplate('tools-model-unoffered', TOOLS_TEMPLATE);
    const unoffered = (content: string): TrainingSample => ({ ...callingSample(content), tools: undefined });
    const set = rowsFromSamples([unoffered(''), unoffered('Let me run it.')], tok, 'rl', 512);
    expect(set.skipped).toEqual({ 'nothing to train in the reply (no text, and no call to a tool the conversation offered)': 1 });
    const row = set.rows[0]!;
    expect(tok.decode(row.inputIds.slice(row.responseStart), false)).toBe('Let me run it.<|im_end|>\n');
    expect(tok.decode(row.inputIds.slice(0, row.responseStart), false)).not.toContain('Tools:');
  });

  it('a reply that calls tools, on a template that does not write calls (Phi-3\'s), is skipped rather than trained as an empty reply', () => {
    const tok = withTemplate('no-calls-model', TOOLS_TEMPLATE.replace(/{% for c in m.tool_calls[^]*?{% endfor %}/, ''));
    const set = rowsFromSamples([callingSample(''), callingSample('Let me run it.')], tok, 'rl', 512);
    expect(set.rows).toEqual([]);
    expect(set.skipped).toEqual({ 'the chat template does not write tool calls': 2 });
  });

  it('opd keeps hinted samples and the at-least-one sample; combine keeps all of them', () => {
    expect(origins(rowsFromSamples(samples, tokenizer, 'opd', 512).rows)).toEqual(['openai:sort/2', 'openai:sort/4', 'openai:s1/2']);
    const combine = rowsFromSamples(samples, tokenizer, 'combine', 512).rows;
    expect(combine.map((r) => [r.origin, r.reward, !!r.teacher, !!r.kept])).toEqual([
      ['openai:sort/2', -1, true, false],
      ['openai:sort/4', 0, true, false], // hint without ±1: r = 0
      ['openai:sort/6', 1, false, false], // ±1 without hint: teacher = old
      ['openai:s1/2', 0, false, true],
    ]);
  });

  it('the student is context + reply through the chat template; the teacher has the hint and the same reply tokens', () => {
    const row = rowsFromSamples(samples, tokenizer, 'opd', 512).rows[0]!;
    const s = samples[0]!;
    const prompt = tokenizer.decode(row.inputIds.slice(0, row.responseStart), false);
    expect(prompt).toBe(tokenizer.applyChatTemplate(s.messages.map((m) => ({ ...m })), { addGenerationPrompt: true }));
    expect(tokenizer.decode(row.inputIds.slice(row.responseStart), false)).toBe(s.response.content + '<|im_end|>\n');
    const t = row.teacher!;
    expect(t.inputIds.slice(t.responseStart)).toEqual(row.inputIds.slice(row.responseStart));
    const teacherPrompt = tokenizer.decode(t.inputIds.slice(0, t.responseStart), false);
    expect(teacherPrompt).toContain(`Write me a function to sort a list in Python.${HINT_PREFIX}Write it in Python, as the user asked.<|im_end|>`);
    expect(teacherPrompt.endsWith('<|im_start|>assistant\n')).toBe(true);
  });
});

describe('--data files', () => {
  const write = (name: string, lines: unknown[]) => {
    const file = path.join(tmp, name);
    fs.writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
    return file;
  };
  const V = 100;

  it('reads rl, opd and combine lines; drops reward-0 rl lines; keeps old_logprobs', () => {
    const f = write('ok.jsonl', [
      { input_ids: [1, 2, 3, 4], response_start: 2, reward: 1, old_logprobs: [-0.5, -1.5] },
      { input_ids: [1, 2, 3], response_start: 1, reward: 0 },
      '',
      { input_ids: [5, 6, 7], response_start: 2, reward: -1, teacher_input_ids: [9, 9, 5, 7], teacher_response_start: 3 },
    ]);
    const rl = rowsFromJsonl(f, 'rl', V, 512);
    expect(rl.rows.map((r) => [r.origin, r.reward])).toEqual([[`${f}:1`, 1], [`${f}:4`, -1]]);
    expect(rl.rows[0]!.oldLogprobs).toEqual([-0.5, -1.5]);
    expect(rl.skipped).toEqual({ 'reward 0': 1 });
    const opdFile = write('opd.jsonl', [{ input_ids: [5, 6, 7], response_start: 2, teacher_input_ids: [9, 9, 5, 7], teacher_response_start: 3 }]);
    expect(rowsFromJsonl(opdFile, 'opd', V, 512).rows[0]!.teacher).toEqual({ inputIds: [9, 9, 5, 7], responseStart: 3 });
    expect(rowsFromJsonl(f, 'combine', V, 512).rows).toHaveLength(2);
  });

  const cases: [string, unknown, string, RegExp][] = [
    ['not JSON', '{"input_ids": [1, 2', 'rl', /invalid JSON/],
    ['not an object', '[1,2,3]', 'rl', /expected a JSON object/],
    ['missing ids', { response_start: 1, reward: 1 }, 'rl', /input_ids must be a non-empty array of token ids/],
    ['id out of vocab', { input_ids: [1, 100], response_start: 1, reward: 1 }, 'rl', /input_ids holds 100, not a token id in \[0, 100\)/],
    ['start 0', { input_ids: [1, 2], response_start: 0, reward: 1 }, 'rl', /response_start must be an integer in \[1, 1\]/],
    ['start at end', { input_ids: [1, 2], response_start: 2, reward: 1 }, 'rl', /response_start must be an integer in \[1, 1\].*got 2/],
    ['bad reward', { input_ids: [1, 2], response_start: 1, reward: 2 }, 'rl', /reward must be 1, -1 or 0, got 2/],
    ['rl without reward', { input_ids: [1, 2], response_start: 1 }, 'rl', /rl needs "reward"/],
    ['opd without teacher', { input_ids: [1, 2], response_start: 1, reward: 1 }, 'opd', /opd needs "teacher_input_ids" and "teacher_response_start"/],
    ['teacher tokens differ', { input_ids: [1, 2, 3], response_start: 1, teacher_input_ids: [4, 2, 4], teacher_response_start: 1 }, 'opd', /the teacher's response tokens .* differ from the student's/],
    ['teacher start missing', { input_ids: [1, 2], response_start: 1, teacher_input_ids: [4, 2] }, 'opd', /teacher_response_start must be an integer/],
    ['combine without either', { input_ids: [1, 2], response_start: 1 }, 'combine', /combine needs "reward", or "teacher_input_ids"/],
    ['old_logprobs length', { input_ids: [1, 2, 3], response_start: 1, reward: 1, old_logprobs: [-1] }, 'rl', /old_logprobs must be 2 finite log-probs/],
    ['old_logprobs positive', { input_ids: [1, 2], response_start: 1, reward: 1, old_logprobs: [0.5] }, 'rl', /old_logprobs must be 1 finite log-probs ≤ 0/],
  ];
  for (const [name, line, method, error] of cases) {
    it(`names the line: ${name}`, () => {
      const f = write('bad.jsonl', [{ input_ids: [1, 2], response_start: 1, reward: 1, teacher_input_ids: [3, 2], teacher_response_start: 1 }, line]);
      expect(() => rowsFromJsonl(f, method as 'rl', V, 512)).toThrow(new RegExp('bad\\.jsonl:2: ' + error.source));
    });
  }

  it('names a missing file', () => {
    expect(() => rowsFromJsonl(path.join(tmp, 'missing.jsonl'), 'rl', V, 512)).toThrow(/cannot read .*missing\.jsonl: ENOENT/);
  });
});

describe('truncation, padding and step order', () => {
  it('--data rows: context is cut from the left (keeping the first token); a reply that does not fit is never cut', () => {
    const row: TrainRow = { inputIds: [1, 10, 11, 12, 13, 20, 21], responseStart: 5, reward: 1, origin: 'x', oldLogprobs: [-1, -2],
      teacher: { inputIds: [1, 30, 31, 10, 11, 12, 13, 20, 21], responseStart: 7 } };
    expect(fitRow(row, 5)).toBe('cut');
    expect(row).toMatchObject({ inputIds: [1, 12, 13, 20, 21], responseStart: 3, oldLogprobs: [-1, -2] });
    expect(row.teacher).toEqual({ inputIds: [1, 12, 13, 20, 21], responseStart: 3 });
    const long: TrainRow = { inputIds: [1, 2, 20, 21, 22], responseStart: 2, reward: 1, origin: 'y' };
    expect(fitRow(long, 3)).toBe('over');
    expect(long.inputIds).toEqual([1, 2, 20, 21, 22]);
    const short: TrainRow = { inputIds: [1, 2, 3], responseStart: 1, reward: 1, origin: 'z' };
    expect(fitRow(short, 3)).toBe('fits');
  });

  it('--data rows whose reply does not fit are skipped and counted as over the window', () => {
    const file = path.join(tmp, 'long.jsonl');
    fs.writeFileSync(file, [
      { input_ids: [1, 2, 3, 4, 5, 6], response_start: 1, reward: 1 },
      { input_ids: [1, 2, 3, 4, 5, 6], response_start: 4, reward: 1 },
    ].map((l) => JSON.stringify(l)).join('\n'));
    const set = rowsFromJsonl(file, 'rl', 100, 4);
    expect(set.rows.map((r) => r.inputIds)).toEqual([[1, 4, 5, 6]]);
    expect([set.skipped, set.truncated]).toEqual([{ 'over 4 tokens': 1 }, 1]);
  });

  it('pads on the right with masks and positions, response mask on reply tokens only', () => {
    const b = padBatch([{ inputIds: [1, 2, 3, 4], responseStart: 2 }, { inputIds: [5, 6], responseStart: 1 }]);
    expect([b.batch, b.seqLen]).toEqual([2, 4]);
    expect(Array.from(b.inputIds, Number)).toEqual([1, 2, 3, 4, 5, 6, 0, 0]);
    expect(Array.from(b.attentionMask, Number)).toEqual([1, 1, 1, 1, 1, 1, 0, 0]);
    expect(Array.from(b.positionIds, Number)).toEqual([0, 1, 2, 3, 0, 1, 0, 0]);
    expect(Array.from(b.responseMask)).toEqual([0, 0, 1, 1, 0, 1, 0, 0]);
  });

  it('every epoch visits every row once, in a seeded order; the same (seed, step) always gives the same rows', () => {
    const rows = Array.from({ length: 10 }, (_, i): TrainRow => ({ inputIds: [1, 2], responseStart: 1, reward: 1, origin: String(i) }));
    for (const epoch of [0, 1]) {
      const seen = [0, 1, 2, 3].flatMap((j) => rowsForStep(rows, 3, epoch * 4 + j, 9, seededRandom).rows.map((r) => r.origin));
      expect([...seen].sort()).toEqual(rows.map((r) => r.origin).sort());
    }
    expect(rowsForStep(rows, 3, 3, 9, seededRandom).rows).toHaveLength(1); // the epoch's last, short batch
    expect(rowsForStep(rows, 3, 5, 9, seededRandom)).toEqual(rowsForStep(rows, 3, 5, 9, seededRandom));
    const e0 = [0, 1, 2, 3].flatMap((j) => rowsForStep(rows, 3, j, 9, seededRandom).rows.map((r) => r.origin));
    const e1 = [4, 5, 6, 7].flatMap((j) => rowsForStep(rows, 3, j, 9, seededRandom).rows.map((r) => r.origin));
    expect(e0).not.toEqual(e1);
  });
});

describe('advantages', () => {
  const rows: TrainRow[] = [
    { inputIds: [1, 2, 3], responseStart: 1, reward: -1, origin: 'a', teacher: { inputIds: [1, 9, 2, 3], responseStart: 2 } },
    { inputIds: [4, 5, 6, 7], responseStart: 2, reward: 1, origin: 'b', oldLogprobs: [-0.25, -0.75] },
  ];
  const setup = () => {
    const batch = padBatch(rows);
    const policyOld = new Float32Array(batch.batch * batch.seqLen).map((_, i) => -0.1 * (i + 1));
    const teacher = [Float32Array.from([-0.5, -0.25]), undefined];
    return { batch, policyOld, teacher };
  };

  it('rl: A = r on every reply token; old from the policy, or the rollout when given', () => {
    const { batch, policyOld, teacher } = setup();
    const m = fillAdvantages({ method: 'rl', weights: { wOpd: 1, wRl: 1 }, rows, batch, policyOld, teacher });
    expect(Array.from(batch.advantages)).toEqual([0, -1, -1, 0, 0, 0, 1, 1]);
    expect(Array.from(batch.oldLogprobs)).toEqual([0, policyOld[1], policyOld[2], 0, 0, 0, -0.25, -0.75].map(Math.fround));
    expect(m).toEqual({ rewardMean: 0, advMean: 0, teacherStudentGap: null });
  });

  it('opd: A = teacher − old, zero where there is no teacher; combine adds w_rl·r', () => {
    let { batch, policyOld, teacher } = setup();
    const opd = fillAdvantages({ method: 'opd', weights: { wOpd: 1, wRl: 1 }, rows, batch, policyOld, teacher });
    const gap = [-0.5 - policyOld[1]!, -0.25 - policyOld[2]!];
    expect(Array.from(batch.advantages)).toEqual([0, gap[0], gap[1], 0, 0, 0, 0, 0].map(Math.fround));
    expect(opd.teacherStudentGap).toBeCloseTo((gap[0]! + gap[1]!) / 2, 6);
    ({ batch, policyOld, teacher } = setup());
    fillAdvantages({ method: 'combine', weights: { wOpd: 2, wRl: 0.5 }, rows, batch, policyOld, teacher });
    expect(Array.from(batch.advantages)).toEqual([0, 2 * gap[0]! - 0.5, 2 * gap[1]! - 0.5, 0, 0, 0, 0.5, 0.5].map(Math.fround));
  });
});

describe('checkpoints', () => {
  it('save and load give back the same bits, and latest.json names the newest complete one', () => {
    const config = Checkpoint.open(modelDir).config;
    const lora = { r: 2, alpha: 4, targets: ['q', 'down'] as const };
    const specs = loraSpecs(config, [...lora.targets]);
    const weights = initLora(specs, 2, 1);
    const m = new Map([...weights].map(([k, v]) => [k, v.map((x) => x * 0.5)]));
    const v = new Map([...weights].map(([k, w]) => [k, w.map((x) => x * x)]));
    const out = path.join(tmp, 'run');
    const state = (step: number) => ({ format: 1 as const, step, totalSteps: 4, settings: { any: 'thing' }, datasetSha256: 'abc', savedAt: 'now' });
    saveCheckpoint(out, { state: state(1), lora: { ...lora, targets: [...lora.targets] }, specs, weights, optimizer: { step: 1, m, v }, baseModel: modelDir });
    const second = saveCheckpoint(out, { state: state(2), lora: { ...lora, targets: [...lora.targets] }, specs, weights, optimizer: { step: 2, m, v }, baseModel: modelDir });
    expect(findCheckpoint(out)).toBe(second);
    expect(fs.readdirSync(path.join(out, 'checkpoints')).sort()).toEqual(['latest.json', 'step-000002']);
    const back = loadCheckpoint(out, config);
    expect(back.state.step).toBe(2);
    expect(back.optimizer.step).toBe(2);
    for (const [k, w] of weights) {
      expect(Buffer.from(back.weights.get(k)!.buffer).equals(Buffer.from(w.buffer))).toBe(true);
      expect(Buffer.from(back.optimizer.m.get(k)!.buffer).equals(Buffer.from(m.get(k)!.buffer))).toBe(true);
      expect(Buffer.from(back.optimizer.v.get(k)!.buffer).equals(Buffer.from(v.get(k)!.buffer))).toBe(true);
    }
    expect(() => loadCheckpoint(path.join(tmp, 'model'), config)).toThrow(/no checkpoint to resume from/);
  });
});

/**
 * The TRL hand-off, run for real (docs/design.md §Interoperability): for each method a
 * `handoff --to trl` bundle's train.py runs through `accelerate launch` (one CPU process, 2
 * optimizer steps) on a tiny Qwen3 made by transformers (./py/tiny_qwen3.py, the real Qwen3
 * tokenizer); GRPO's reward.py asks a judge through Hindsight's own `serve` (its /v1 proxied
 * to a scripted judge here, so the rewards are known). Each adapter comes back: `score
 * --adapter` equals PEFT's log-probs within 1e-4; on a Phi-3 base the bundle adapts its fused
 * qkv_proj and gate_up_proj, whose pairs Hindsight reads as its parts'. Then `hindsight export`'s kto, dpo and sft
 * files go into TRL's trainers as they are (./py/trl_accepts.py), with their row counts and the
 * very tokens Hindsight trains; and a bundle run on a missing base model or a malformed
 * dataset ends with one line from train.py, no traceback.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRL_METHODS, type TrlMethod } from '../../src-shared/handoff.js';
import { rewardPrompt } from '../../src-main/judge/prompts.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { HeuristicJudge } from '../../src-main/judge/verdicts.js';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';
import { runCli } from '../helpers/cli.js';
import { writeRealTokenizer } from '../../tools/real-tokenizers.js';
import { trainScript } from '../../src-main/export/trl-script.js';
import { SESSION_001, SESSION_002, SESSION_003, SORTING, conv, fakeExport, tempWorkspace, trainOnEverySession, type TurnSpec } from '../store/helpers.js';
import { interopPython, pythonEnv } from './python.js';
import { maxAbsDiffRows } from '../helpers/numbers.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../..');
const STEPS = 2;
const LORA_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

let dir: string;
let dbPath: string;
let modelDir: string;
let tokenizer: ChatTokenizer;
const children: ChildProcess[] = [];
let judgeServer: http.Server | undefined;
let judgeUrl = '';
let judgeKey = '';
/** What the scripted judge was asked, and the verdict it gave, in order. */
const judged: { body: any; reward: number }[] = [];

interface Run { code: number | null; stdout: string; stderr: string; seconds: number }
/** Runs a child without blocking this process (the scripted judge answers from here meanwhile). */
function run(cmd: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: options.cwd ?? ROOT, env: options.env ?? pythonEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, seconds: (Date.now() - started) / 1000 }));
  });
}
const python = (script: string, ...args: string[]) => run(interopPython!, [path.join(here, 'py', script), ...args]);
const timed = (what: string, r: Run) => console.log(`${what}: ${r.seconds.toFixed(1)} s`);

/** `accelerate launch` of a bundle's train.py on one CPU process, 2 steps, short sequences. */
function launch(bundle: string, extra: string[] = [], env: Record<string, string> = {}): Promise<Run> {
  const accelerate = path.join(path.dirname(interopPython!), 'accelerate');
  return run(accelerate, [
    'launch', '--quiet', '--num_processes', '1', '--num_machines', '1', '--mixed_precision', 'no', '--dynamo_backend', 'no', '--num_cpu_threads_per_process', '1', '--cpu',
    'train.py', '--batch-size', '2', '--grad-accum', '1', '--max-length', '128', '--max-steps', String(STEPS), '--num-generations', '2', '--lr', '1e-2', ...extra,
  ], { cwd: bundle, env: pythonEnv({ TRL_EXPERIMENTAL_SILENCE: '1', ...env }) });
}

async function handoff(method: TrlMethod, baseModel = modelDir, extra: string[] = []): Promise<string> {
  const out = path.join(dir, `bundle-${method}-${path.basename(baseModel)}`);
  const r = await runCli('handoff', '--db', dbPath, '--to', 'trl', '--base-model', baseModel, '--out', out, '--method', method, ...extra);
  expect(r.code, r.stderr).toBe(0);
  return out;
}

/** The scripted judge behind `serve --upstream`: alternately a reward of 1 (after a reasoning block with another verdict) and 0. */
async function startJudge(): Promise<string> {
  judgeServer = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const parsed = JSON.parse(body);
      const reward = judged.length % 2 === 0 ? 1 : 0;
      judged.push({ body: parsed, reward });
      const content = reward === 1 ? '<think>Maybe \\boxed{-1}.</think> It did what was asked. \\boxed{1}' : 'Unclear. \\boxed{0}';
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ id: 'j', object: 'chat.completion', created: 0, model: parsed.model, choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    });
  });
  await new Promise<void>((r) => judgeServer!.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(judgeServer.address() as { port: number }).port}/v1`;
}

/** `hindsight serve --api-only` whose /v1 proxies to the scripted judge; its base URL and key. */
async function startServe(upstream: string): Promise<{ url: string; key: string }> {
  const child = spawn(process.execPath, ['bin/hindsight.mjs', 'serve', '--db', path.join(dir, 'serve.db'), '--port', '0', '--json', '--api-only', '--upstream', upstream], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`serve exited (${code}): ${stderr}`)));
  });
  const info = JSON.parse(line) as { url: string; loginUrl: string };
  return { url: `${info.url}v1`, key: new URL(info.loginUrl).searchParams.get('token')! };
}

/** An agent's session: the tool it was offered, a reply that calls it, the tool's result, the answer, thanks. */
const WEATHER_TOOLS = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const AGENT_TURNS: TurnSpec[] = [
  ['user', 'What is the weather in Paris?'],
  { role: 'assistant', text: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
  { role: 'tool', text: '18°C and sunny', toolCallId: 'call_1', toolName: 'get_weather' },
  ['assistant', 'It is 18°C and sunny in Paris.'],
  ['user', 'Perfect, thanks!'],
];

const readJson = (file: string) => JSON.parse(fs.readFileSync(file, 'utf8'));
/** A folder holding a hand-off's train.py alone, for tests that import its functions. */
function trainPyFolder(): string {
  const folder = path.join(dir, 'train-py');
  fs.mkdirSync(folder, { recursive: true });
  fs.writeFileSync(path.join(folder, 'train.py'), trainScript({ baseModel: modelDir, initAdapter: null, method: 'sft', loraR: 4, loraAlpha: 8, loraDropout: 0, loraTargets: LORA_TARGETS, lossAgg: 'token-mean', opdTopK: 0 }));
  return folder;
}

const jsonl = (file: string) => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

describe.skipIf(!interopPython)('the TRL hand-off, run for real', () => {
  beforeAll(async () => {
    const started = Date.now();
    let ws;
    ({ ws, dir, dbPath } = await tempWorkspace());
    const regenerated = { atTurn: 2, turn: { role: 'assistant' as const, text: 'Sure! Which language would you like it in?' } };
    await ws.importExport(fakeExport('x.jsonl', [
      conv('sort', SORTING, { createdAt: 10, alternatives: [regenerated] }), conv('rec', SESSION_002, { createdAt: 20 }), conv('geo', SESSION_001, { createdAt: 30 }), conv('web', SESSION_003, { createdAt: 40 }),
      conv('agent', AGENT_TURNS, { createdAt: 50, metadata: { tools: WEATHER_TOOLS } }),
    ]));
    await runJudge(ws, new HeuristicJudge(), { hints: true, force: true });
    ws.setLabel('openai:sort', 4, { repair: 'def sort_list(items, reverse=False):\n    return sorted(items, reverse=reverse)' });
    trainOnEverySession(ws);
    ws.close();
    modelDir = writeRealTokenizer(path.join(dir, 'tiny-qwen3'), 'qwen3');
    const made = await python('tiny_qwen3.py', modelDir);
    expect(made.code, made.stderr).toBe(0);
    tokenizer = ChatTokenizer.load(modelDir);
    const served = await startServe(await startJudge());
    [judgeUrl, judgeKey] = [served.url, served.key];
    console.log(`setup (database, tiny Qwen3 by transformers, serve): ${((Date.now() - started) / 1000).toFixed(1)} s`);
  });
  afterAll(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    judgeServer?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const adapters: Partial<Record<TrlMethod, string>> = {};

  it.each([...TRL_METHODS])('%s: train.py runs 2 steps through accelerate launch and writes the adapter Hindsight trains', async (method) => {
    // dpo continues kto's adapter (--init-adapter): checked below, where the adapters come back
    const extra = method === 'grpo' ? ['--judge-url', judgeUrl, '--judge-model', 'scripted-judge'] : method === 'dpo' ? ['--init-adapter', adapters.kto!] : [];
    const bundle = await handoff(method, modelDir, extra);
    const out = path.join(dir, `adapter-${method}`);
    const before = judged.length;
    const r = await launch(bundle, ['--output-dir', out], method === 'grpo' ? { HINDSIGHT_JUDGE_API_KEY: judgeKey } : {});
    timed(`${method}: accelerate launch train.py`, r);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    expect(r.stderr).not.toContain('Traceback');
    expect(r.stdout).toContain(`adapter written to ${out}`);
    const config = readJson(path.join(out, 'adapter_config.json'));
    expect(config).toMatchObject({ r: 16, lora_alpha: 32, peft_type: 'LORA', base_model_name_or_path: modelDir });
    expect([...config.target_modules].sort()).toEqual([...LORA_TARGETS].sort());
    const state = readJson(path.join(out, `checkpoint-${STEPS}`, 'trainer_state.json'));
    expect(state.global_step).toBe(STEPS);
    const steps = state.log_history.filter((l: Record<string, unknown>) => 'loss' in l);
    expect(steps).toHaveLength(STEPS);
    expect(steps[0].learning_rate).toBeCloseTo(1e-2, 8); // the --lr given, not the method's default
    if (method === 'grpo') {
      // 2 steps × 1 prompt × 2 completions, each judged once through serve, with Hindsight's reward prompt
      const asked = judged.slice(before);
      expect(asked).toHaveLength(STEPS * 2);
      const system = rewardPrompt({ sessionId: '', responseTurn: 0, context: [], response: 'a', responseMessage: { role: 'assistant', content: 'a' }, nextState: { role: 'user', text: 'x' } })[0]!.content;
      for (const a of asked) {
        expect(a.body.messages[0]).toEqual({ role: 'system', content: system });
        expect(a.body.messages[1].content).toMatch(/^## Assistant reply\n/);
      }
      // what reward.py made of the verdicts is what GRPO logged: per step the mean and std of {1, 0}
      for (const [i, step] of steps.entries()) {
        const rewards = asked.slice(i * 2, i * 2 + 2).map((a) => a.reward);
        expect(step['rewards/judge_reward/mean']).toBeCloseTo(rewards.reduce((x, y) => x + y, 0) / 2, 6);
        expect(step.reward_std).toBeCloseTo(Math.SQRT1_2, 4);
      }
    }
    adapters[method] = out;
  });

  it('every adapter comes back: score --adapter equals PEFT\'s log-probs within 1e-4', async () => {
    const sft = jsonl(path.join(dir, 'bundle-sft-tiny-qwen3', 'data', 'sft.jsonl')).slice(0, 3).map((r: { messages: ChatMessage[] }) => ({ messages: r.messages.slice(0, -1), response: r.messages.at(-1)!.content }));
    const dpo = jsonl(path.join(dir, 'bundle-dpo-tiny-qwen3', 'data', 'dpo.jsonl')).map((r: { prompt: ChatMessage[]; chosen: ChatMessage[] }) => ({ messages: r.prompt, response: r.chosen[0]!.content }));
    const rows = [...sft, ...dpo];
    const rowsFile = path.join(dir, 'rows.jsonl');
    fs.writeFileSync(rowsFile, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const methods = TRL_METHODS.filter((m) => adapters[m]);
    expect(methods).toEqual([...TRL_METHODS]);
    const peft = await python('peft_logprobs.py', modelDir, rowsFile, ...methods.map((m) => adapters[m]!));
    timed('PEFT log-probs (base and 5 adapters)', peft);
    expect(peft.code, peft.stderr).toBe(0);
    const reference = JSON.parse(peft.stdout) as Record<string, number[][]>;
    for (const adapter of [undefined, ...methods.map((m) => adapters[m]!)]) {
      const out = path.join(dir, `scored-${adapter ? path.basename(adapter) : 'base'}.jsonl`);
      const started = Date.now();
      const r = await runCli('score', '--model', modelDir, ...(adapter ? ['--adapter', adapter] : []), '--input', rowsFile, '--out', out, '--threads', '1');
      expect(r.code, r.stderr).toBe(0);
      const ours = jsonl(out).map((l: { logprobs: number[] }) => l.logprobs);
      const theirs = reference[adapter ?? 'base']!;
      const diff = maxAbsDiffRows(ours, theirs);
      const moved = adapter ? maxAbsDiffRows(theirs, reference.base!) : 0;
      console.log(`score ${adapter ? path.basename(adapter) : 'base'}: max |Hindsight - PEFT| ${diff.toExponential(2)}, adapter moved log-probs by up to ${moved.toFixed(3)} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      expect(diff).toBeLessThan(1e-4);
      if (adapter) expect(moved).toBeGreaterThan(1e-2); // the comparison could fail: the adapter really changes the model
    }
    // dpo started from kto's adapter: its first step (both pairs in one batch) logged the chosen
    // replies' summed log-probs under that adapter, which PEFT gives too
    const first = readJson(path.join(adapters.dpo!, `checkpoint-${STEPS}`, 'trainer_state.json')).log_history[0];
    const sum = (lp: number[]) => lp.reduce((a, b) => a + b, 0);
    const underKto = reference[adapters.kto!]!.slice(sft.length).map(sum);
    const underBase = reference.base!.slice(sft.length).map(sum);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(Math.abs(first['logps/chosen'] - mean(underKto))).toBeLessThan(1e-3);
    expect(Math.abs(mean(underKto) - mean(underBase))).toBeGreaterThan(1e-2);
  });

  it('on a Phi-3 base, train.py adapts its fused modules, and the adapter comes back as PEFT applies it', async () => {
    const phi3 = writeRealTokenizer(path.join(dir, 'tiny-phi3'), 'qwen3');
    const made = await python('tiny_qwen3.py', phi3, 'phi3');
    expect(made.code, made.stderr).toBe(0);
    const bundle = await handoff('sft', phi3);
    const out = path.join(dir, 'adapter-sft-phi3');
    const r = await launch(bundle, ['--output-dir', out]);
    timed('sft on Phi-3: accelerate launch train.py', r);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    expect([...readJson(path.join(out, 'adapter_config.json')).target_modules].sort()).toEqual(['down_proj', 'gate_up_proj', 'o_proj', 'qkv_proj']);
    const rowsFile = path.join(dir, 'rows.jsonl'); // the rows the test above scored
    const peft = await python('peft_logprobs.py', phi3, rowsFile, out);
    expect(peft.code, peft.stderr).toBe(0);
    const reference = JSON.parse(peft.stdout) as Record<string, number[][]>;
    const scored = path.join(dir, 'scored-phi3.jsonl');
    const s = await runCli('score', '--model', phi3, '--adapter', out, '--input', rowsFile, '--out', scored, '--threads', '1');
    expect(s.code, s.stderr).toBe(0);
    const diff = maxAbsDiffRows(jsonl(scored).map((l: { logprobs: number[] }) => l.logprobs), reference[out]!);
    console.log(`score adapter-sft-phi3: max |Hindsight - PEFT| ${diff.toExponential(2)}, adapter moved log-probs by up to ${maxAbsDiffRows(reference[out]!, reference.base!).toFixed(3)}`);
    expect(diff).toBeLessThan(1e-4);
    expect(maxAbsDiffRows(reference[out]!, reference.base!)).toBeGreaterThan(1e-2);
  });

  it('hindsight export\'s kto, dpo and sft files go into TRL\'s trainers as they are, row for row and token for token', async () => {
    const files: Record<string, { file: string; lines: number }> = {};
    for (const format of ['kto', 'dpo', 'sft']) {
      const file = path.join(dir, `export-${format}.jsonl`);
      const r = await runCli('export', '--db', dbPath, '--format', format, '--out', file, '--json');
      expect(r.code, r.stderr).toBe(0);
      files[format] = { file, lines: r.json().lines };
      expect(files[format]!.lines).toBe(jsonl(file).length);
    }
    expect([files.kto!.lines, files.dpo!.lines, files.sft!.lines]).toEqual([10, 2, 8]); // the agent's two replies in kto and sft
    const r = await python('trl_accepts.py', modelDir, path.join(dir, 'trl-accepts'), files.kto!.file, files.dpo!.file, files.sft!.file, path.join(dir, 'bundle-sft-tiny-qwen3'));
    timed('KTOTrainer, DPOTrainer, SFTTrainer on the exports', r);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const trl = JSON.parse(r.stdout);
    for (const format of ['kto', 'dpo', 'sft', 'sft_handoff']) {
      const lines = files[format.replace('_handoff', '')]!.lines;
      expect([trl[format].read, trl[format].rows], format).toEqual([lines, lines]);
    }
    /** The tools a line offers (a JSON string, as TRL reads them), as template options. */
    const offered = (row: { tools?: string }) => (row.tools ? { tools: JSON.parse(row.tools) as unknown[] } : {});
    /** The tokens Hindsight trains on for a prompt and reply: ids, and where the reply starts. */
    const span = (prompt: ChatMessage[], reply: ChatMessage[], row: { tools?: string }) => tokenizer.encodeResponse(prompt, reply[0]!, offered(row));
    // KTO: the prompt is Hindsight's prompt, the completion its reply span; labels as exported
    const kto = jsonl(files.kto!.file);
    expect(trl.kto.columns).toEqual(expect.arrayContaining(['prompt', 'completion', 'label', 'prompt_ids', 'completion_ids']));
    kto.forEach((row: { prompt: ChatMessage[]; completion: ChatMessage[]; label: boolean; tools?: string }, i: number) => {
      const ours = span(row.prompt, row.completion, row);
      expect(trl.kto.tokens[i].prompt_ids, `kto ${i}`).toEqual(ours.inputIds.slice(0, ours.responseStart));
      expect(trl.kto.tokens[i].completion_ids, `kto ${i}`).toEqual(ours.inputIds.slice(ours.responseStart));
    });
    // DPO: chosen and rejected are each Hindsight's reply span after the same prompt
    jsonl(files.dpo!.file).forEach((row: { prompt: ChatMessage[]; chosen: ChatMessage[]; rejected: ChatMessage[]; tools?: string }, i: number) => {
      for (const side of ['chosen', 'rejected'] as const) {
        const ours = span(row.prompt, row[side], row);
        expect(trl.dpo.tokens[i].prompt_ids, `dpo ${i}`).toEqual(ours.inputIds.slice(0, ours.responseStart));
        expect(trl.dpo.tokens[i][`${side}_ids`], `dpo ${i} ${side}`).toEqual(ours.inputIds.slice(ours.responseStart));
      }
    });
    // SFT: the messages row as it is is the whole conversation, and SFTTrainer learns every token of it
    // (its default); train.py's last_reply_only makes it learn exactly Hindsight's reply span.
    jsonl(files.sft!.file).forEach((row: { messages: ChatMessage[]; tools?: string }, i: number) => {
      expect(trl.sft.tokens[i].input_ids, `sft ${i}`).toEqual(tokenizer.encode(tokenizer.applyChatTemplate(row.messages, offered(row))));
      expect(trl.sft.tokens[i].labels, `sft ${i}`).toEqual(trl.sft.tokens[i].input_ids);
      const ours = span(row.messages.slice(0, -1), row.messages.slice(-1), row);
      const handed = trl.sft_handoff.tokens[i];
      expect(handed.input_ids, `sft_handoff ${i}`).toEqual(ours.inputIds);
      expect(handed.labels, `sft_handoff ${i}`).toEqual(ours.inputIds.map((id, t) => (t < ours.responseStart ? -100 : id)));
    });
  });

  // The families whose templates must be given the conversation in their own form
  // (src-main/model/tool-call-dialects.ts): train.py's tokenizer gives it so (its Python port,
  // src-main/export/trl-template-messages.ts), and renders what Hindsight renders; plain
  // transformers does not (DeepSeek's calls: transformers 5 drops the None content its template tests).
  it("train.py's tokenizer renders each family's tool calls as Hindsight does, and ends a trained reply as Hindsight does: DeepSeek, Granite 3, GLM-4, Phi-4-mini, Mistral's 9-character ids", async () => {
    const families = ['deepseek-r1-distill-llama-8b', 'deepseek-v3.1', 'granite-3.3-instruct', 'glm-4-0414', 'phi-4-mini-instruct', 'mistral-small-3.2', 'llama-3.1-instruct'];
    const messages = [
      { role: 'system', content: 'You check the weather.' },
      { role: 'user', content: 'Weather in Rome?' },
      // One call a turn: Llama 3.1's template takes no more.
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_rome_00002', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome","days":[1,2]}' } }] },
      { role: 'tool', tool_call_id: 'call_rome_00002', content: '24 C, clear' },
      { role: 'assistant', content: 'Rome: 24 C and clear.' },
    ];
    const history = messages.slice(0, 4); // up to the tool's result: every rewrite, no reply to end
    const folders = families.map((name) => writeRealTokenizer(path.join(dir, `family-${name}`), 'qwen2.5', fs.readFileSync(path.join(ROOT, 'test/model/fixtures/templates', `${name}.jinja`), 'utf8')));
    const script = [
      'import json, sys', `sys.path.insert(0, ${JSON.stringify(trainPyFolder())})`, 'import train',
      'from transformers import AutoTokenizer',
      'folders, messages, history, tools = [json.loads(a) for a in sys.argv[1:5]]',
      'def plain(folder):',
      '    try:',
      '        return AutoTokenizer.from_pretrained(folder).apply_chat_template(history, tools=tools, tokenize=False)',
      '    except Exception as err:',
      '        return "raised: " + type(err).__name__',
      // As TRL's SFT tokenizes a row (trl/data_utils.py _tokenize): chat_template=None among the keywords, ids returned.
      'def wrapped(t):',
      '    kw = dict(tools=tools, chat_template=None)',
      '    return [t.apply_chat_template(history, tokenize=False, **kw), list(t.apply_chat_template(history, tokenize=True, return_dict=True, **kw)["input_ids"])]',
      // What TRL trains of a row ending with a reply: the whole conversation's text after the prompt's.
      'def completions(t):',
      '    kw = dict(tools=tools, chat_template=None)',
      '    def after_prompt(conversation):',
      '        prompt = t.apply_chat_template(conversation[:-1], add_generation_prompt=True, tokenize=False, **kw)',
      '        full = t.apply_chat_template(conversation, tokenize=False, **kw)',
      '        return full[len(prompt):] if full.startswith(prompt) else None',
      '    return [after_prompt(messages[:3]), after_prompt(messages)]',
      'def both(folder):',
      '    t = train.with_hindsight_messages(AutoTokenizer.from_pretrained(folder))',
      '    return wrapped(t) + [plain(folder), completions(t)]',
      'print(json.dumps([both(f) for f in folders]))',
    ].join('\n');
    const r = await run(interopPython!, ['-c', script, ...[folders, messages, history, WEATHER_TOOLS].map((a) => JSON.stringify(a))]);
    expect(r.code, r.stderr).toBe(0);
    const rendered = JSON.parse(r.stdout) as [string, number[], string, (string | null)[]][];
    families.forEach((name, i) => {
      const tokenizer = ChatTokenizer.load(folders[i]!);
      const ours = tokenizer.applyChatTemplate(history, { tools: WEATHER_TOOLS });
      const [text, ids, plain, completions] = rendered[i]!;
      expect(text, name).toBe(ours);
      expect(ids, name).toEqual(tokenizer.encodeChat(history, { tools: WEATHER_TOOLS }));
      expect(ours, name).toContain('Rome');
      // Without the wrapper these families' calls do not come out as Hindsight trains them (Llama 3.1: the arguments quoted).
      expect(plain, name).not.toBe(ours);
      // The replies TRL trains, the call and the answer, end as Hindsight's do (GLM-4: the next
      // turn's opening; DeepSeek-R1: its single call closed). But for DeepSeek-R1's call, whose
      // prompt opens a think the call turn renders without: TRL cuts the prompt where the two
      // renders part (its warning), where Hindsight continues the opened think.
      const trained = [messages.slice(0, 3), messages].map((conversation) => {
        const span = tokenizer.encodeResponse(conversation.slice(0, -1), conversation.at(-1)!, { tools: WEATHER_TOOLS });
        return tokenizer.decode(span.inputIds.slice(span.responseStart), false);
      });
      if (name === 'deepseek-r1-distill-llama-8b') trained[0] = null as unknown as string;
      expect(completions, name).toEqual(trained);
    });
    // The ends Hindsight adds where the template writes none, now in TRL's completions too.
    expect(rendered[families.indexOf('glm-4-0414')]![3]).toEqual([expect.stringMatching(/<\|observation\|>$/), expect.stringMatching(/<\|user\|>$/)]);
  });

  it('train.py\'s tokenizer renders a tool call\'s JSON-string arguments as the object, as Hindsight does (Qwen2.5\'s template quotes a string)', async () => {
    const qwen25 = writeRealTokenizer(path.join(dir, 'qwen2.5-tokenizer'), 'qwen2.5');
    const messages = [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":[1,2]}' } }] },
    ];
    const script = [
      'import json, sys', `sys.path.insert(0, ${JSON.stringify(trainPyFolder())})`, 'import train',
      'from transformers import AutoTokenizer',
      `messages, tools = json.loads(sys.argv[1]), json.loads(sys.argv[2])`,
      `plain = AutoTokenizer.from_pretrained(${JSON.stringify(qwen25)})`,
      `wrapped = train.with_hindsight_messages(AutoTokenizer.from_pretrained(${JSON.stringify(qwen25)}))`,
      'print(json.dumps([t.apply_chat_template(messages, tools=tools, tokenize=False) for t in (plain, wrapped)]))',
    ].join('\n');
    const r = await run(interopPython!, ['-c', script, JSON.stringify(messages), JSON.stringify(WEATHER_TOOLS)]);
    expect(r.code, r.stderr).toBe(0);
    const [plain, wrapped] = JSON.parse(r.stdout) as [string, string];
    const ours = ChatTokenizer.load(qwen25).applyChatTemplate(messages, { tools: WEATHER_TOOLS });
    expect(wrapped).toBe(ours);
    expect(ours).toContain('"arguments": {"city": "Paris", "days": [1, 2]}');
    expect(plain).toContain('"arguments": "{\\"city\\"'); // what TRL renders from the dataset's string without it
  });

  describe('bad input on the Python side ends with one line from train.py', () => {
    /** The run failed, with no traceback, and its last stderr line is train.py's. */
    const oneLine = (r: Run): string => {
      expect(r.code).not.toBe(0);
      expect(r.stderr + r.stdout).not.toContain('Traceback');
      const last = r.stderr.trim().split('\n').at(-1)!;
      expect(last.startsWith('train.py: ')).toBe(true);
      return last;
    };

    it('a base model that is not there', async () => {
      const r = await launch(await handoff('kto', path.join(dir, 'no-such-model')), ['--output-dir', path.join(dir, 'never')]);
      timed('missing base model', r);
      expect(oneLine(r)).toBe(`train.py: the base model '${path.join(dir, 'no-such-model')}' is not a folder (give a local Hugging Face model folder or a Hub id with --base-model)`);
      expect(fs.existsSync(path.join(dir, 'never'))).toBe(false);
    });

    it('a malformed dataset: a line that is not JSON, a row without a column', async () => {
      const bundle = await handoff('kto');
      const data = path.join(bundle, 'data', 'kto.jsonl');
      const good = fs.readFileSync(data, 'utf8');
      fs.writeFileSync(data, `${good}{"prompt": [], "completion": [\n`);
      const broken = await launch(bundle, ['--output-dir', path.join(dir, 'never')]);
      timed('malformed dataset', broken);
      const after = good.split('\n').filter(Boolean).length + 1; // the line appended
      expect(oneLine(broken)).toBe(`train.py: data/kto.jsonl line ${after}: not JSON (Expecting value at column 31)`);
      fs.writeFileSync(data, `${good}{"prompt": [], "completion": []}\n`);
      const r = await run(interopPython!, ['train.py', '--output-dir', path.join(dir, 'never')], { cwd: bundle }); // train.py alone, as a user may run it
      expect(oneLine(r)).toBe(`train.py: data/kto.jsonl line ${after}: missing column(s) label (expected prompt, completion, label)`);
    });
  });
});

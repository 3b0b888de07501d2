// `hindsight handoff --to trl` (docs/design.md §Hand-off): every dataset in the fields TRL's
// trainers read (a schema check per dataset), train.py and reward.py that Python compiles,
// accelerate configs that parse as YAML with the keys accelerate reads, the judge prompts
// equal to the local judge's, and reward.py scoring against a judge endpoint.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRL_METHODS } from '../../src-shared/handoff.js';
import { DATASET_FIELDS } from '../../src-main/export/trl-datasets.js';
import { rewardPrompt } from '../../src-main/judge/prompts.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { HeuristicJudge } from '../../src-main/judge/verdicts.js';
import type { Workspace } from '../../src-main/workspace/workspace.js';
import { runCli } from '../helpers/cli.js';
import { SESSION_002, SORTING, conv, fakeExport, tempWorkspace } from '../store/helpers.js';

let ws: Workspace;
let dir: string;
let dbPath: string;
let out: string;

/** A Python 3 for the compile and run checks, or null (then those checks say why they are skipped). */
function findPython(): string | null {
  for (const candidate of ['python3', '/usr/bin/python3']) {
    if (spawnSync(candidate, ['-c', 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)']).status === 0) return candidate;
  }
  return null;
}
const python = findPython();
const pythonWithYaml = ['/usr/bin/python3', 'python3'].find((p) => spawnSync(p, ['-c', 'import yaml']).status === 0) ?? null;

beforeAll(async () => {
  ({ ws, dir, dbPath } = await tempWorkspace());
  const regenerated = { atTurn: 2, turn: { role: 'assistant' as const, text: 'Sure! Which language would you like it in?' } };
  await ws.importExport(fakeExport('x.jsonl', [conv('sort', SORTING, { createdAt: 10, alternatives: [regenerated] }), conv('rec', SESSION_002, { createdAt: 20 })]));
  await runJudge(ws, new HeuristicJudge(), { hints: true, force: true });
  ws.setLabel('openai:sort', 4, { repair: 'def sort_list(items, reverse=False):\n    return sorted(items, reverse=reverse)' });
  ws.close();
  out = path.join(dir, 'handoff');
  const r = await runCli('handoff', '--db', dbPath, '--to', 'trl', '--base-model', 'Qwen/Qwen3-14B', '--out', out, '--method', 'grpo', '--gpus', '4', '--json');
  expect(r.code, r.stderr).toBe(0);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const lines = (file: string) => fs.readFileSync(path.join(out, file), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

type Msg = { role: string; content: string };
function expectMessages(value: unknown, where: string): asserts value is Msg[] {
  expect(Array.isArray(value), where).toBe(true);
  expect((value as unknown[]).length, where).toBeGreaterThan(0);
  for (const m of value as Msg[]) {
    expect(['system', 'user', 'assistant', 'tool'], where).toContain(m.role);
    expect(typeof m.content, where).toBe('string');
  }
}
const oneAssistant = (value: unknown, where: string) => {
  expectMessages(value, where);
  expect(value.map((m) => m.role), where).toEqual(['assistant']);
};

/** TRL's documented field shapes, conversational form. */
const SCHEMAS: Record<(typeof TRL_METHODS)[number], (row: any, where: string) => void> = {
  kto: (row, w) => (expectMessages(row.prompt, w), oneAssistant(row.completion, w), expect(typeof row.label, w).toBe('boolean')),
  dpo: (row, w) => (expectMessages(row.prompt, w), oneAssistant(row.chosen, w), oneAssistant(row.rejected, w)),
  sft: (row, w) => (expectMessages(row.messages, w), expect(row.messages.at(-1).role, w).toBe('assistant')),
  sdft: (row, w) => (expectMessages(row.prompt, w), expect(row.privileged_context.trim().length, w).toBeGreaterThan(0)),
  grpo: (row, w) => {
    expectMessages(row.prompt, w);
    expect(['user', 'tool'], w).toContain(row.prompt.at(-1).role);
    expect(typeof row.next_state, w).toBe('string');
    expect(['user', 'tool'], w).toContain(row.next_state_role);
    expect(Number.isInteger(row.turn), w).toBe(true);
  },
};

describe('handoff --to trl', () => {
  it('writes each dataset in TRL field shapes, with exactly the documented columns', () => {
    const record = JSON.parse(fs.readFileSync(path.join(out, 'handoff.json'), 'utf8'));
    expect(record).toMatchObject({ to: 'trl', method: 'grpo', base_model: 'Qwen/Qwen3-14B', gpus: 4, lora: { r: 16, alpha: 32 } });
    for (const method of TRL_METHODS) {
      const rows = lines(`data/${method}.jsonl`);
      expect(rows.length, method).toBeGreaterThan(0);
      rows.forEach((row, i) => {
        expect(Object.keys(row), `${method}:${i + 1}`).toEqual([...DATASET_FIELDS[method]]);
        SCHEMAS[method](row, `${method}:${i + 1}`);
      });
    }
  });

  it('writes judge prompts that are the local judge prompt with placeholders', () => {
    const prompts = JSON.parse(fs.readFileSync(path.join(out, 'judge_prompts.json'), 'utf8'));
    const input = { sessionId: 's', responseTurn: 1, context: [], response: 'Here it is.', responseMessage: { role: 'assistant' as const, content: 'Here it is.' }, nextState: { role: 'tool' as const, text: 'Error: 404' } };
    const [system, user] = rewardPrompt(input);
    expect(prompts.reward.system).toBe(system!.content);
    expect(prompts.reward.user_templates.tool.replace('<<<REPLY>>>', 'Here it is.').replace('<<<NEXT_STATE>>>', 'Error: 404')).toBe(user!.content);
  });

  it('writes accelerate configs with the keys accelerate reads, for 1 and N GPUs', () => {
    const read = (f: string) => fs.readFileSync(path.join(out, 'accelerate', f), 'utf8');
    expect(read('single_gpu.yaml')).toMatch(/^num_processes: 1$/m);
    expect(read('fsdp.yaml')).toMatch(/^distributed_type: FSDP$/m);
    expect(read('fsdp.yaml')).toMatch(/^num_processes: 4$/m);
    expect(read('zero3.yaml')).toMatch(/^ {2}zero_stage: 3$/m);
    if (!pythonWithYaml) {
      console.log('skipped: YAML parse of the accelerate configs (no Python with the yaml module here)');
      return;
    }
    for (const f of ['single_gpu.yaml', 'fsdp.yaml', 'zero3.yaml']) {
      const parsed = JSON.parse(execFileSync(pythonWithYaml, ['-c', 'import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))', path.join(out, 'accelerate', f)], { encoding: 'utf8' }));
      expect(parsed.mixed_precision, f).toBe('bf16');
      expect(parsed.num_processes, f).toBe(f === 'single_gpu.yaml' ? 1 : 4);
    }
    const fsdp = JSON.parse(execFileSync(pythonWithYaml, ['-c', 'import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))', path.join(out, 'accelerate', 'fsdp.yaml')], { encoding: 'utf8' }));
    expect(fsdp.fsdp_config.fsdp_use_orig_params).toBe(true);
  });

  it('writes train.py and reward.py that Python compiles, with the LoRA and trainer asked for', () => {
    const train = fs.readFileSync(path.join(out, 'train.py'), 'utf8');
    expect(train).toContain('BASE_MODEL = "Qwen/Qwen3-14B"');
    expect(train).toContain('METHOD = "grpo"');
    expect(train).toMatch(/LORA_R = 16\nLORA_ALPHA = 32\nLORA_DROPOUT = 0\nLORA_TARGETS = \["q_proj","k_proj","v_proj","o_proj","gate_proj","up_proj","down_proj"\]/);
    expect(train).toContain('activation_checkpointing=True');
    expect(fs.readFileSync(path.join(out, 'requirements.txt'), 'utf8')).toMatch(/^trl==\d/m);
    expect(fs.readFileSync(path.join(out, 'README.md'), 'utf8')).toContain('accelerate launch --quiet --config_file accelerate/fsdp.yaml train.py');
    if (!python) {
      console.log('skipped: python3 -m py_compile (no python3 on this machine)');
      return;
    }
    execFileSync(python, ['-m', 'py_compile', path.join(out, 'train.py'), path.join(out, 'reward.py')]);
  });

  it("reward.py scores completions with the judge endpoint's boxed answers", async () => {
    if (!python) {
      console.log('skipped: running reward.py (no python3 on this machine)');
      return;
    }
    const seen: any[] = [];
    const judge = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const parsed = JSON.parse(body);
        seen.push(parsed);
        const reply = parsed.messages[1].content.includes('I said Python') ? '<think>\\boxed{1}</think> It ignored the request. \\boxed{-1}' : 'Fine. \\boxed{1}';
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: reply } }] }));
      });
    });
    await new Promise<void>((r) => judge.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(judge.address() as { port: number }).port}/v1`;
    try {
      const script = `import json, reward\nprint(json.dumps(reward.judge_reward(prompts=[[], []], completions=[[{"role": "assistant", "content": "a"}], "b"], next_state=["No, I said Python", "thanks"], next_state_role=["user", "user"])))`;
      const { stdout } = await execAsync(python, ['-c', script], { cwd: out, env: { ...process.env, HINDSIGHT_JUDGE_URL: url, HINDSIGHT_JUDGE_MODEL: 'j' } });
      expect(JSON.parse(stdout)).toEqual([-1, 1]);
      expect(seen[0].model).toBe('j');
      expect(seen[0].messages[0].content).toBe(rewardPrompt({ sessionId: '', responseTurn: 0, context: [], response: 'a', responseMessage: { role: 'assistant', content: 'a' }, nextState: { role: 'user', text: 'x' } })[0]!.content);
    } finally {
      judge.close();
    }
  });

  it('refuses bad usage with one line', async () => {
    expect((await runCli('handoff', '--db', dbPath, '--to', 'trl', '--out', out)).stderr).toMatch(/--base-model is required/);
    expect((await runCli('handoff', '--db', dbPath, '--to', 'trl', '--base-model', 'x', '--out', out, '--method', 'ppo')).code).toBe(2);
    const bad = await runCli('handoff', '--db', dbPath, '--to', 'trl', '--base-model', 'x', '--out', out, '--init-adapter', dir);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/not a PEFT adapter folder/);
  });
});

function execAsync(cmd: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<{ stdout: string }> {
  return new Promise((resolve, reject) => {
    import('node:child_process').then(({ execFile }) =>
      execFile(cmd, args, { ...options, encoding: 'utf8' }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve({ stdout }))),
    );
  });
}

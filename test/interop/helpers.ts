// Shared by the interoperability tests: one Python child run without blocking the vitest worker,
// and the tokenizer files of the tiny models transformers makes for them.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { TINY_CHAT_TEMPLATE, tinyTokenizerJson } from '../../tools/tiny-models.js';

/** Runs `python args…` with `input` on stdin; resolves with its stdout's last line (the scripts' JSON), or rejects with the end of its stderr. */
export function runPython(python: string, args: string[], input: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, args, { env });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => {
      if (status === 0) resolve(stdout.trim().split('\n').pop() ?? '');
      else reject(new Error(`${args.join(' ')} exited with ${status}:\n${stderr.slice(-3000)}`));
    });
    child.stdin.end(input);
  });
}

/**
 * Makes `dir` with tools/tiny-models.ts's byte-level BPE tokenizer.json and a
 * tokenizer_config.json with its ChatML template: what transformers' AutoTokenizer and
 * Hindsight both read, before test/interop/py/make_models.py adds the model.
 */
export function writeTinyTokenizerFolder(dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tinyTokenizerJson().json));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', chat_template: TINY_CHAT_TEMPLATE, tokenizer_class: 'PreTrainedTokenizerFast',
  }));
  return dir;
}


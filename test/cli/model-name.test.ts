// --model NAME (src-main/model/model-name.ts): a name `hindsight models` lists stands for its
// path wherever a model is taken. Over a fake Ollama store in a temporary home, laid out as
// Ollama lays it out (manifests/registry.ollama.ai/library/<model>/<tag> → blobs/sha256-<hex>,
// the digest the blob's own sha256), holding a tiny Qwen3 written as GGUF; beside it LM Studio's
// folder and a folder of the user's that hold the same file name (an ambiguous name).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeGguf as writeGgufFromFolder } from '../../bench/gguf-writer.js';
import { closeNames, looksLikePath, resolveModelName } from '../../src-main/model/model-name.js';
import { scanModels } from '../../src-main/model/model-catalog.js';
import { UserError } from '../../src-shared/types.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { runCli } from '../helpers/cli.js';
import { f32Bytes, str, u32, writeGguf } from '../model/gguf-writer.js';
import { conv, fakeExport } from '../store/helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-model-name-'));
const home = path.join(dir, 'home');
const store = path.join(home, '.ollama', 'models');
const mine = path.join(dir, 'mine');
const db = path.join(dir, 'hindsight.db');
const saved = { HOME: process.env.HOME, OLLAMA_MODELS: process.env.OLLAMA_MODELS, HF_HOME: process.env.HF_HOME, HF_HUB_CACHE: process.env.HF_HUB_CACHE, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };
let blob = '';
const env = () => ({ home, env: {} as Record<string, string | undefined>, folders: [mine] });

/** Puts `file` into Ollama's store as `library/<model>:<tag>` (its blob named by its sha256, as `ollama pull` leaves it); returns the blob. */
function ollamaModel(file: string, model: string, tag: string): string {
  const hex = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  const blobFile = path.join(store, 'blobs', `sha256-${hex}`);
  fs.mkdirSync(path.dirname(blobFile), { recursive: true });
  fs.copyFileSync(file, blobFile);
  const manifest = path.join(store, 'manifests', 'registry.ollama.ai', 'library', model, tag);
  fs.mkdirSync(path.dirname(manifest), { recursive: true });
  fs.writeFileSync(manifest, JSON.stringify({
    schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: `sha256:${'c'.repeat(64)}`, size: 2 },
    layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${hex}`, size: fs.statSync(file).size }],
  }));
  return blobFile;
}

function unsupported(file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  writeGguf(file, { 'general.architecture': str('gemma3n'), 'general.file_type': u32(0), 'gemma3n.context_length': u32(8192), 'tokenizer.ggml.model': str('gpt2') }, [
    { name: 'token_embd.weight', dims: [8, 16], type: 0, bytes: f32Bytes(new Float32Array(128)) },
  ]);
}

beforeAll(() => {
  const tiny = path.join(dir, 'tiny-qwen3');
  writeTinyModel(tiny, { family: 'qwen3', tie: true, seed: 5 });
  const gguf = path.join(dir, 'tiny-qwen3-f32.gguf');
  writeGgufFromFolder(tiny, gguf, { type: 'f32' });
  blob = ollamaModel(gguf, 'qwen3', '0.6b');
  ollamaModel(gguf, 'smol', 'latest');
  const gemma = path.join(dir, 'gemma.gguf');
  unsupported(gemma);
  ollamaModel(gemma, 'gemma3n', 'e2b');
  // The same name in LM Studio's folder and in a folder of the user's: ambiguous.
  for (const root of [path.join(home, '.lmstudio', 'models'), mine]) {
    fs.mkdirSync(path.join(root, 'pub', 'repo'), { recursive: true });
    fs.copyFileSync(gguf, path.join(root, 'pub', 'repo', 'tiny.gguf'));
  }
  process.env.HOME = home;
  for (const k of ['OLLAMA_MODELS', 'HF_HOME', 'HF_HUB_CACHE', 'XDG_CACHE_HOME'] as const) delete process.env[k];
});
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  fs.rmSync(dir, { recursive: true, force: true });
});

function refusal(value: string, flag = '--model'): string {
  try {
    resolveModelName(value, flag, env());
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    const message = (err as Error).message;
    expect(message.split('\n')).toHaveLength(1);
    return message;
  }
  throw new Error(`${value} resolved`);
}

describe('--model NAME: a name hindsight models lists', () => {
  it('is the path of the model of that name, spelt as Ollama spells it', () => {
    expect(scanModels(env()).models.find((m) => m.name === 'qwen3:0.6b')).toMatchObject({ path: blob, loadable: true });
    expect(resolveModelName('qwen3:0.6b', '--model', env())).toBe(blob);
    expect(resolveModelName('library/qwen3:0.6b', '--model', env())).toBe(blob);
    expect(resolveModelName('registry.ollama.ai/library/qwen3:0.6b', '--model', env())).toBe(blob);
    expect(resolveModelName('QWEN3:0.6B', '--model', env())).toBe(blob); // another case, when that picks one model
    expect(resolveModelName('smol', '--model', env())).toBe(resolveModelName('smol:latest', '--model', env())); // no tag: latest
  });

  it('leaves a path alone: one that exists, or one written as a path', () => {
    expect(resolveModelName(blob, '--model', env())).toBe(blob);
    expect(resolveModelName('./qwen3:0.6b', '--model', env())).toBe('./qwen3:0.6b');
    expect(resolveModelName(path.join(dir, 'nope'), '--model', env())).toBe(path.join(dir, 'nope'));
    expect(looksLikePath('~/models/x.gguf')).toBe(true);
    expect(looksLikePath('Qwen/Qwen3-0.6B')).toBe(false);
  });

  it('is one line naming both models when two have the name', () => {
    const msg = refusal('pub/repo/tiny.gguf');
    expect(msg).toBe(`--model pub/repo/tiny.gguf: 2 models have that name (LM Studio: ${path.join(home, '.lmstudio', 'models', 'pub', 'repo', 'tiny.gguf')}; ` +
      `Your folders: ${path.join(mine, 'pub', 'repo', 'tiny.gguf')}): give the path of the one you mean`);
  });

  it('is one line with the closest names when no model has it', () => {
    expect(refusal('qwen3:8b')).toBe("--model qwen3:8b: no such file or folder, and no model of that name in 'hindsight models'; the closest: qwen3:0.6b");
    expect(refusal('qwen3')).toMatch(/no model of that name in 'hindsight models'; the closest: qwen3:0\.6b$/); // Ollama's qwen3 is qwen3:latest
    expect(refusal('llama3.2:1b', '--judge-model')).toMatch(/^--judge-model llama3\.2:1b: no such file or folder, and no model of that name in 'hindsight models'(; the closest: .*)?$/);
    expect(closeNames('gemma', scanModels(env()).models)).toEqual(['gemma3n:e2b']);
  });

  it('is one line with the reason when the model cannot be loaded', () => {
    expect(refusal('gemma3n:e2b')).toMatch(/^--model gemma3n:e2b: Ollama's gemma3n:e2b \(.*sha256-[0-9a-f]{64}\) cannot be loaded: architecture 'gemma3n' is not supported/);
  });
});

describe('the commands that take --model', () => {
  it('generate runs the Ollama model by its name, as by its blob path', async () => {
    const args = ['--prompt', 'hello', '--max-new-tokens', '4', '--json', '--threads', '1'];
    const byName = await runCli('generate', '--model', 'qwen3:0.6b', ...args);
    expect(byName.code, byName.stderr).toBe(0);
    // (After the lines of a first load's conversion of the weights, where the graph cache had none.)
    expect(byName.stderr.replace(/^converting .*\n/gm, '')).toMatch(/^4 tokens in .* on cpu, fp32, finish: length\n$/);
    const byPath = await runCli('generate', '--model', blob, ...args);
    expect(byName.json().tokens).toEqual(byPath.json().tokens);
    expect(byName.json().tokens.length).toBeGreaterThan(0);
  }, 60_000);

  it('every command says an unknown name in one line, exit status 1', async () => {
    for (const argv of [
      ['generate', '--model', 'qwen3:8b', '--prompt', 'hi'],
      ['score', '--model', 'qwen3:8b', '--input', path.join(dir, 'in.jsonl'), '--out', path.join(dir, 'out.jsonl')],
      ['train', '--model', 'qwen3:8b', '--out', path.join(dir, 'run'), '--db', db],
      ['eval', '--model', 'qwen3:8b', '--db', db],
      ['judge', '--backend', 'local', '--model', 'qwen3:8b', '--db', db],
      ['export-model', '--run', path.join(dir, 'run'), '--model', 'qwen3:8b', '--out', path.join(dir, 'x')],
    ]) {
      const r = await runCli(...argv);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.stderr, argv.join(' ')).toBe(`hindsight ${argv[0]}: --model qwen3:8b: no such file or folder, and no model of that name in 'hindsight models'; the closest: qwen3:0.6b\n`);
    }
  });

  it("counts the folders added to the database's settings", async () => {
    // Without them the name is LM Studio's alone (eval then stops at the missing database) …
    const before = await runCli('eval', '--model', 'pub/repo/tiny.gguf', '--db', db);
    expect(before.code).toBe(1);
    expect(before.stderr).toBe(`hindsight eval: no database at ${db}: import chats first\n`);
    // … with the user's folder added, two models have it.
    expect((await runCli('models', '--db', db, '--add', mine)).code).toBe(0);
    const after = await runCli('eval', '--model', 'pub/repo/tiny.gguf', '--db', db);
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(/^hindsight eval: --model pub\/repo\/tiny\.gguf: 2 models have that name \(LM Studio: .*; Your folders: .*\): give the path of the one you mean\n$/);
  });
});

describe('--judge-model: lessons takes what eval takes', () => {
  it('a name hindsight models lists is the local judge of both; an unknown name is the same one line', async () => {
    const hinted = path.join(dir, 'hinted.db');
    const ws = await Workspace.open(hinted);
    await ws.importExport(fakeExport('c.jsonl', [conv('a', [['user', 'Sort this.'], ['assistant', 'xs.sort()'], ['user', 'No, in Python.']])]));
    ws.setLabel('openai:a', 1, { reward: -1, hint: 'Use Python.' });
    ws.close();
    // lessons: the Ollama name is the judge's model (the tiny model's answer holds no lessons, so rules write them).
    const byName = await runCli('lessons', '--regenerate', '--judge-backend', 'local', '--judge-model', 'qwen3:0.6b', '--db', hinted, '--json');
    expect(byName.code, byName.stderr).toBe(0);
    expect(byName.json()).toMatchObject({ distiller: `local:${blob}`, hints: 1 });
    // An unknown name: the same line from both, exit status 1.
    const evalArgs = ['eval', '--model', blob, '--judge-backend', 'local', '--judge-model', 'qwen3:8b', '--db', hinted];
    const lessonsArgs = ['lessons', '--regenerate', '--judge-backend', 'local', '--judge-model', 'qwen3:8b', '--db', hinted];
    for (const argv of [evalArgs, lessonsArgs]) {
      const r = await runCli(...argv);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.stderr, argv.join(' ')).toBe(`hindsight ${argv[0]}: --judge-model qwen3:8b: no such file or folder, and no model of that name in 'hindsight models'; the closest: qwen3:0.6b\n`);
    }
  }, 60_000);
});

// `hindsight models`: the catalog as a table and as JSON, over a fake Ollama store in a
// temporary home, and --add / --remove keeping the user's folders in the database's settings.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settingsPathFor } from '../../src-main/store/settings-file.js';
import { validateCall, ValidationError } from '../../src-shared/contract.js';
import { runCli } from '../helpers/cli.js';
import { withEnv } from '../helpers/env.js';
import { estimateInferenceMemory } from '../../src-shared/inference-memory.js';
import { modelShape } from '../../src-main/model/host-memory.js';
import { f32Bytes, str, u32, writeGguf } from '../model/gguf-writer.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-models-cli-'));
const home = path.join(dir, 'home');
const db = path.join(dir, 'hindsight.db');
const saved = { HOME: process.env.HOME, OLLAMA_MODELS: process.env.OLLAMA_MODELS, HF_HOME: process.env.HF_HOME, HF_HUB_CACHE: process.env.HF_HUB_CACHE, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };

function gguf(file: string, arch: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // The hyper-parameters a model needs (the list checks them as loading does): hidden 8, vocabulary 16.
  const shape = { embedding_length: 8, 'attention.head_count': 2, block_count: 1, feed_forward_length: 16 };
  writeGguf(file, {
    'general.architecture': str(arch), 'general.file_type': u32(7), [`${arch}.context_length`]: u32(8192), 'tokenizer.ggml.model': str('gpt2'),
    ...Object.fromEntries(Object.entries(shape).map(([k, v]) => [`${arch}.${k}`, u32(v)])),
  }, [
    { name: 'token_embd.weight', dims: [8, 16], type: 0, bytes: f32Bytes(new Float32Array(128)) },
  ]);
}

beforeAll(() => {
  const store = path.join(home, '.ollama', 'models');
  gguf(path.join(store, 'blobs', `sha256-${'a'.repeat(64)}`), 'llama');
  fs.mkdirSync(path.join(store, 'manifests', 'registry.ollama.ai', 'library', 'smollm2'), { recursive: true });
  fs.writeFileSync(path.join(store, 'manifests', 'registry.ollama.ai', 'library', 'smollm2', '135m'), JSON.stringify({ layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${'a'.repeat(64)}` }] }));
  gguf(path.join(dir, 'mine', 'gemma.gguf'), 'gemma3n');
  process.env.HOME = home;
  for (const k of ['OLLAMA_MODELS', 'HF_HOME', 'HF_HUB_CACHE', 'XDG_CACHE_HOME'] as const) delete process.env[k];
});
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('hindsight models', () => {
  it('prints a table of the models found, with the path --model takes and where it looked', async () => {
    const r = await runCli('models', '--db', db);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ +NAME +SOURCE +ARCHITECTURE +PARAMS +SIZE +QUANT +CONTEXT +ANSWERS HERE$/m);
    // The tiny model fits in fp32 on any machine: what a chat with it needs beside.
    expect(r.stdout).toMatch(/^✓ +smollm2:135m +Ollama +llama +128 +\d+ B +Q8_0 +8192 +fp32, about \d+ MB$/m);
    expect(r.stdout).toContain('ANSWERS HERE: the form of its weights a chat takes on this machine now');
    expect(r.stdout).toContain(`     ${path.join(home, '.ollama', 'models', 'blobs', `sha256-${'a'.repeat(64)}`)}\n`);
    expect(r.stdout).toContain('1 model(s), 1 Hindsight can load');
    expect(r.stdout).toContain(`${path.join(home, '.lmstudio', 'models')}  (not there)`);
    expect(r.stdout).toContain('hindsight models --add DIR');
  });

  it('says how each model would answer here: the form a chat takes, or too big', async () => {
    const listed = (await runCli('models', '--db', db, '--json')).json().models[0];
    const shape = modelShape(listed.path);
    expect(listed.answers).toEqual({ form: 'none', bytes: estimateInferenceMemory(shape, { quantize: 'none' }).total, contextTokens: 8192 });
    const none = await withEnv('HINDSIGHT_MEMORY_BUDGET', '1M', () => runCli('models', '--db', db));
    expect(none.stdout).toMatch(/^✓ +smollm2:135m .* too big \(int4: about \d+ MB\)$/m);
    // Memory for a 4,096-token chat in fp32 but not its 8,192: how long a chat fits is said too.
    const short = String(Math.ceil(estimateInferenceMemory(shape, { quantize: 'none', contextTokens: 4096 }).total));
    const shorter = await withEnv('HINDSIGHT_MEMORY_BUDGET', short, () => runCli('models', '--db', db));
    expect(shorter.stdout).toMatch(/^✓ +smollm2:135m .* 8192 +fp32, about \d+ MB, chats to 4,096 tokens$/m);
  });

  it('--add keeps a folder in the settings and lists its models, with the reason one cannot load; --remove forgets it', async () => {
    const mine = path.join(dir, 'mine');
    const added = await runCli('models', '--db', db, '--add', mine, '--json');
    expect(added.code).toBe(0);
    expect(added.stderr).toBe(`added ${mine}\n`);
    const catalog = added.json();
    expect(catalog.folders).toEqual([mine]);
    expect(catalog.models.map((m: { name: string }) => m.name)).toEqual(['smollm2:135m', 'gemma.gguf']);
    expect(catalog.models[1]).toMatchObject({ source: 'folder', loadable: false, reason: "architecture 'gemma3n' is not supported (supported: llama, qwen2, qwen3, phi3, granite, olmo2, mistral3, smollm3, gemma2, gemma3, glm4)" });
    expect(JSON.parse(fs.readFileSync(settingsPathFor(db), 'utf8')).modelFolders).toEqual([mine]);
    expect((await runCli('models', '--db', db)).stdout).toContain("     cannot load: architecture 'gemma3n' is not supported");

    const again = await runCli('models', '--db', db, '--json');
    expect(again.json().folders).toEqual([mine]);
    const removed = await runCli('models', '--db', db, '--remove', mine, '--json');
    expect(removed.code).toBe(0);
    expect(removed.json().folders).toEqual([]);
    expect(removed.json().models).toHaveLength(1);
  });

  it('is the listModels call of the contract, whose input is checked like every call', () => {
    expect(validateCall('listModels', {})).toEqual({});
    expect(() => validateCall('listModels', { folder: '/tmp' })).toThrow(ValidationError);
  });

  it('refuses a folder that does not exist, or one never added, in one line', async () => {
    const r = await runCli('models', '--db', db, '--add', path.join(dir, 'nope'));
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`hindsight models: --add ${path.join(dir, 'nope')}: no such folder\n`);
    const s = await runCli('models', '--db', db, '--remove', path.join(dir, 'mine'));
    expect(s.code).toBe(1);
    expect(s.stderr).toMatch(/not one of your folders \(none added\)/);
  });
});

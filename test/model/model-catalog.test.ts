// The model catalog (src-main/model/model-catalog.ts) over fake stores built in a temporary
// home: Ollama's manifests and blobs, LM Studio's folders, the Hugging Face cache and a folder
// of the user's, with small real GGUF files and a real tiny checkpoint, and the broken cases
// (unreadable manifest, missing blob, truncated GGUF, split model missing a part, link loops,
// a snapshot whose files were never downloaded). Nothing throws; each broken entry says why.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { writeGguf as writeGgufFromFolder } from '../../bench/gguf-writer.js';
import { scanModels, ollamaName } from '../../src-main/model/model-catalog.js';
import { inspectGguf } from '../../src-main/model/model-inspect.js';
import { readGgufHeader } from '../../src-main/model/gguf/reader.js';
import { isGgufPath, isModelPath } from '../../src-main/model/model-path.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { formatBytes, formatParameters, type CatalogModel } from '../../src-shared/models-api.js';
import { f32Bytes, ggufBytes, str, u32, writeGguf, type MetaValue, type TensorToWrite } from './gguf-writer.js';

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-catalog-'));
afterAll(() => fs.rmSync(home, { recursive: true, force: true }));

const VOCAB = Array.from({ length: 5000 }, (_, i) => `tok${i}`);

/** The hyper-parameters a model needs under `arch` (the list checks them as loading does). */
const shapeKeys = (arch: string, shape: Record<string, number>): Record<string, MetaValue> =>
  Object.fromEntries(Object.entries(shape).map(([k, v]) => [`${arch}.${k}`, u32(v)]));

/** A small GGUF: an embedding (F32, hidden 8, vocabulary 16) and one Q8_0 matrix, with a 5,000-token vocabulary to step over. */
function smallGguf(file: string, opts: { arch?: string; fileType?: number; ctx?: number; extra?: Record<string, MetaValue>; tensors?: TensorToWrite[] } = {}): void {
  const arch = opts.arch ?? 'qwen2';
  fs.mkdirSync(path.dirname(file), { recursive: true });
  writeGguf(file, {
    'general.architecture': str(arch),
    ...(opts.fileType !== undefined ? { 'general.file_type': u32(opts.fileType) } : {}),
    [`${arch}.context_length`]: u32(opts.ctx ?? 32768),
    ...shapeKeys(arch, { embedding_length: 8, 'attention.head_count': 2, block_count: 1, feed_forward_length: 16 }),
    'tokenizer.ggml.model': str('gpt2'),
    'tokenizer.ggml.tokens': { type: 'array', elem: 'string', value: VOCAB },
    ...opts.extra,
  }, opts.tensors ?? [
    { name: 'token_embd.weight', dims: [8, 16], type: 0, bytes: f32Bytes(new Float32Array(128)) },
    { name: 'blk.0.attn_q.weight', dims: [32, 32], type: 8, bytes: new Uint8Array(32 * 34) },
  ]);
}

function manifest(layers: { mediaType: string; digest: string }[]): string {
  return JSON.stringify({ schemaVersion: 2, config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: `sha256:${'c'.repeat(64)}` }, layers: layers.map((l) => ({ ...l, size: 1 })) });
}

function write(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

let catalog: ReturnType<typeof scanModels>;
const byName = (name: string): CatalogModel => {
  const m = catalog.models.find((x) => x.name === name);
  if (!m) throw new Error(`${name} is not in the catalog: ${catalog.models.map((x) => x.name).join(', ')}`);
  return m;
};

beforeAll(() => {
  // Ollama: manifests → blobs (the model layer is a GGUF with no extension).
  const ollama = path.join(home, '.ollama', 'models');
  const manifests = path.join(ollama, 'manifests', 'registry.ollama.ai');
  const blob = (hex: string) => path.join(ollama, 'blobs', `sha256-${hex}`);
  smallGguf(blob('a'.repeat(64)), { fileType: 15 });
  write(blob('b'.repeat(64)), '{{ .Prompt }}');
  write(path.join(manifests, 'library', 'qwen2.5', '7b-instruct'), manifest([
    { mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${'a'.repeat(64)}` },
    { mediaType: 'application/vnd.ollama.image.template', digest: `sha256:${'b'.repeat(64)}` },
    { mediaType: 'application/vnd.ollama.image.params', digest: `sha256:${'d'.repeat(64)}` },
  ]));
  write(path.join(manifests, 'someone', 'tuned', 'latest'), manifest([
    { mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${'a'.repeat(64)}` },
    { mediaType: 'application/vnd.ollama.image.adapter', digest: `sha256:${'e'.repeat(64)}` },
  ]));
  write(path.join(manifests, 'library', 'gone', 'latest'), manifest([{ mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${'f'.repeat(64)}` }]));
  write(path.join(manifests, 'library', 'garbled', 'latest'), '{"layers": [');
  smallGguf(blob('1'.repeat(64)), { arch: 'gemma3n', fileType: 2 });
  write(path.join(ollama, 'manifests', 'hf.co', 'bartowski', 'gemma-3n-E2B-it-GGUF', 'Q4_0'), manifest([{ mediaType: 'application/vnd.ollama.image.model', digest: `sha256:${'1'.repeat(64)}` }]));

  // LM Studio: publisher/repo/*.gguf, in the new and the old place; a split model, one missing a part; a truncated file.
  const lms = path.join(home, '.lmstudio', 'models');
  smallGguf(path.join(lms, 'lmstudio-community', 'Qwen3-0.6B-GGUF', 'Qwen3-0.6B-Q8_0.gguf'), { arch: 'qwen3', ctx: 40960 });
  const q8 = path.join(lms, 'lmstudio-community', 'Qwen3-0.6B-GGUF', 'Qwen3-0.6B-Q8_0.gguf');
  const whole = fs.readFileSync(q8);
  fs.writeFileSync(path.join(lms, 'lmstudio-community', 'Qwen3-0.6B-GGUF', 'Qwen3-0.6B-cut.gguf'), whole.subarray(0, whole.length - 40));
  for (const part of [1, 2]) {
    smallGguf(path.join(lms, 'pub', 'split', `big-0000${part}-of-00002.gguf`), {
      arch: 'llama', extra: { 'split.count': u32(2) },
      tensors: [{ name: part === 1 ? 'token_embd.weight' : 'blk.0.ffn_up.weight', dims: [8, 16], type: 0, bytes: f32Bytes(new Float32Array(128)) }],
    });
  }
  smallGguf(path.join(lms, 'pub', 'half', 'half-00001-of-00002.gguf'), { arch: 'llama' });
  smallGguf(path.join(lms, 'pub', 'yarn', 'long.gguf'), { extra: { 'qwen2.rope.scaling.type': str('dynamic') } });
  smallGguf(path.join(lms, 'pub', 'pre', 'ds.gguf'), { extra: { 'tokenizer.ggml.pre': str('deepseek-llm') } });
  smallGguf(path.join(lms, 'pub', 'partial', 'p.gguf'), { arch: 'llama', extra: { 'llama.embedding_length': u32(64), 'llama.attention.head_count': u32(4), 'llama.rope.dimension_count': u32(8) } });
  smallGguf(path.join(home, '.cache', 'lm-studio', 'models', 'old', 'repo', 'iq.gguf'), {
    arch: 'llama', tensors: [{ name: 'token_embd.weight', dims: [256, 1], type: 16, bytes: new Uint8Array(66) }],
  });

  // The Hugging Face cache (HF_HOME here): a checkpoint, a GGUF repository, a snapshot with a dangling link.
  const hub = path.join(home, 'hf', 'hub');
  const repo = path.join(hub, 'models--org--tiny-qwen3');
  writeTinyModel(path.join(repo, 'snapshots', 'abc123'), { family: 'qwen3', dtype: 'BF16', maxPositions: 2048 });
  write(path.join(repo, 'refs', 'main'), 'abc123');
  fs.mkdirSync(path.join(repo, 'snapshots', 'old000'));
  smallGguf(path.join(hub, 'models--org--tiny-GGUF', 'snapshots', 'r1', 'tiny.Q8_0.gguf'), { arch: 'llama' });
  const dangling = path.join(hub, 'models--org--unfinished', 'snapshots', 'r1');
  fs.mkdirSync(dangling, { recursive: true });
  fs.symlinkSync('../../blobs/0123456789', path.join(dangling, 'config.json'));
  fs.mkdirSync(path.join(hub, 'models--org--tokenizer-only', 'snapshots', 'r1'), { recursive: true });
  write(path.join(hub, 'models--org--tokenizer-only', 'snapshots', 'r1', 'tokenizer.json'), '{}');

  // A folder of the user's: a runnable GGUF written from a tiny checkpoint, a link loop, a folder link back up.
  const mine = path.join(home, 'my-models');
  writeTinyModel(path.join(home, 'work', 'tiny-llama'), { family: 'llama' });
  writeGgufFromFolder(path.join(home, 'work', 'tiny-llama'), path.join(mine, 'tiny-llama-f32.gguf'), { type: 'f32' });
  fs.symlinkSync('loop.gguf', path.join(mine, 'loop.gguf'));
  fs.mkdirSync(path.join(mine, 'nested'));
  fs.symlinkSync('..', path.join(mine, 'nested', 'up'));
  fs.cpSync(path.join(home, 'work', 'tiny-llama'), path.join(mine, 'nested', 'tiny-llama-folder'), { recursive: true });

  catalog = scanModels({ home, env: { HF_HOME: path.join(home, 'hf') }, folders: [mine, path.join(home, 'no-such-folder')] });
});

describe('model catalog', () => {
  it('lists Ollama models by their Ollama names, with the blob as the path and the facts from its GGUF header', () => {
    const m = byName('qwen2.5:7b-instruct');
    expect(m).toMatchObject({
      source: 'ollama', format: 'gguf', architecture: 'qwen2', parameters: 1152, quantization: 'Q4_K_M', contextLength: 32768, loadable: true, reason: null,
    });
    expect(m.path).toBe(path.join(home, '.ollama', 'models', 'blobs', `sha256-${'a'.repeat(64)}`));
    expect(m.bytes).toBe(fs.statSync(m.path).size);
    // The blob has no .gguf extension, yet every model field takes it.
    expect(isGgufPath(m.path) && isModelPath(m.path)).toBe(true);
    expect(byName('hf.co/bartowski/gemma-3n-E2B-it-GGUF:Q4_0')).toMatchObject({ architecture: 'gemma3n', quantization: 'Q4_0', loadable: false });
    expect(byName('hf.co/bartowski/gemma-3n-E2B-it-GGUF:Q4_0').reason).toMatch(/architecture 'gemma3n' is not supported \(supported: llama, qwen2, qwen3, phi3, granite, olmo2, mistral3, smollm3, gemma2, gemma3, glm4\)/);
  });

  it('says why for a broken Ollama entry: unreadable manifest, missing blob, an ADAPTER layer', () => {
    expect(byName('garbled:latest')).toMatchObject({ loadable: false });
    expect(byName('garbled:latest').reason).toMatch(/^unreadable manifest: /);
    expect(byName('gone:latest').reason).toMatch(new RegExp(`blob sha256-${'f'.repeat(64)} is missing .*ollama pull gone:latest`));
    expect(byName('someone/tuned:latest')).toMatchObject({ loadable: false, architecture: 'qwen2' });
    expect(byName('someone/tuned:latest').reason).toMatch(/ADAPTER layer/);
  });

  it('lists LM Studio files by publisher/repo/file, a split model once with all its parts, and the broken ones with a reason', () => {
    expect(byName('lmstudio-community/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf')).toMatchObject({ source: 'lmstudio', architecture: 'qwen3', quantization: 'Q8_0', contextLength: 40960, loadable: true });
    const cut = byName('lmstudio-community/Qwen3-0.6B-GGUF/Qwen3-0.6B-cut.gguf');
    expect(cut.loadable).toBe(false);
    expect(cut.reason).toMatch(/truncated or corrupt GGUF/);
    expect(cut.reason).not.toContain(home); // the entry shows the path; the reason does not repeat it
    const split = byName('pub/split/big-00001-of-00002.gguf');
    expect(split).toMatchObject({ parameters: 256, loadable: true, quantization: 'F32' });
    expect(catalog.models.some((m) => m.name.includes('big-00002'))).toBe(false);
    expect(split.bytes).toBe(fs.statSync(split.path).size + fs.statSync(split.path.replace('00001-of', '00002-of')).size);
    expect(byName('pub/half/half-00001-of-00002.gguf').reason).toBe('part half-00002-of-00002.gguf of the split model is missing');
    expect(byName('pub/yarn/long.gguf').reason).toBe("qwen2.rope.scaling.type 'dynamic' is not supported (supported: linear, yarn, Llama 3's rope_freqs and Phi-3's LongRoPE factors)");
    expect(byName('pub/pre/ds.gguf').reason).toBe("the pre-tokenizer 'deepseek-llm' (tokenizer.ggml.pre) is not supported");
    expect(byName('pub/partial/p.gguf').reason).toBe('partial RoPE (llama.rope.dimension_count 8 of head size 16) is not supported');
    expect(byName('old/repo/iq.gguf')).toMatchObject({ source: 'lmstudio', loadable: false, quantization: 'IQ2_XXS' });
    expect(byName('old/repo/iq.gguf').reason).toMatch(/tensor type IQ2_XXS is not supported/);
  });

  it('lists the Hugging Face cache: the checkpoint refs/main names, GGUF repositories, and a snapshot never downloaded', () => {
    const tiny = byName('org/tiny-qwen3');
    expect(tiny).toMatchObject({ source: 'huggingface', format: 'safetensors', architecture: 'Qwen3ForCausalLM', quantization: 'BF16', contextLength: 2048, loadable: true });
    expect(tiny.path).toBe(path.join(home, 'hf', 'hub', 'models--org--tiny-qwen3', 'snapshots', 'abc123'));
    const ckpt = Checkpoint.open(tiny.path);
    expect(tiny.parameters).toBe(ckpt.tensorNames.reduce((a, n) => a + ckpt.entry(n).shape.reduce((x, d) => x * d, 1), 0));
    expect(byName('org/tiny-GGUF/tiny.Q8_0.gguf')).toMatchObject({ source: 'huggingface', format: 'gguf', loadable: true });
    expect(byName('org/unfinished')).toMatchObject({ loadable: false });
    expect(byName('org/unfinished').reason).toMatch(/config\.json: missing/);
    expect(catalog.models.some((m) => m.name.startsWith('org/tokenizer-only'))).toBe(false);
  });

  it("lists the user's folders, following links once: a link loop is an entry with its reason, not a hang", () => {
    expect(byName('tiny-llama-f32.gguf')).toMatchObject({ source: 'folder', architecture: 'llama', quantization: 'F32', contextLength: 512, loadable: true });
    expect(byName('loop.gguf')).toMatchObject({ loadable: false, reason: 'a symbolic link loop' });
    expect(byName('nested/tiny-llama-folder')).toMatchObject({ format: 'safetensors', architecture: 'LlamaForCausalLM', loadable: true });
    expect(catalog.searched.find((l) => l.path.endsWith('no-such-folder'))).toMatchObject({ source: 'folder', exists: false });
  });

  it('says where it looked, honours OLLAMA_MODELS and HF_HUB_CACHE, and finds nothing in an empty home', () => {
    expect(catalog.searched.map((l) => [l.source, path.relative(home, l.path)])).toEqual([
      ['ollama', path.join('.ollama', 'models')], ['lmstudio', path.join('.lmstudio', 'models')], ['lmstudio', path.join('.cache', 'lm-studio', 'models')],
      ['huggingface', path.join('hf', 'hub')], ['folder', 'my-models'], ['folder', 'no-such-folder'],
    ]);
    const moved = scanModels({ home: path.join(home, 'empty'), env: { OLLAMA_MODELS: path.join(home, '.ollama', 'models'), HF_HUB_CACHE: path.join(home, 'hf', 'hub') } });
    expect(moved.models.map((m) => m.name)).toContain('qwen2.5:7b-instruct');
    expect(moved.models.map((m) => m.name)).toContain('org/tiny-qwen3');
    expect(scanModels({ home: path.join(home, 'empty'), env: {} }).models).toEqual([]);
    // LM Studio's own settings may move its models folder ("Models Directory").
    const other = path.join(home, 'elsewhere');
    fs.mkdirSync(path.join(other, '.lmstudio'), { recursive: true });
    smallGguf(path.join(other, 'D', 'gguf', 'pub', 'repo', 'm.gguf'), { arch: 'llama' });
    fs.writeFileSync(path.join(other, '.lmstudio', 'settings.json'), JSON.stringify({ downloadsFolder: path.join(other, 'D', 'gguf') }));
    const lm = scanModels({ home: other, env: {} });
    expect(lm.searched[1]).toEqual({ source: 'lmstudio', path: path.join(other, 'D', 'gguf'), exists: true });
    expect(lm.models.map((m) => `${m.source} ${m.name}`)).toEqual(['lmstudio pub/repo/m.gguf']);
  });

  it('reads only headers: a 5,000-token vocabulary is stepped over, not decoded', () => {
    const file = path.join(home, '.ollama', 'models', 'blobs', `sha256-${'a'.repeat(64)}`);
    expect(inspectGguf(file)).toMatchObject({ loadable: true, parameters: 1152 });
    expect(readGgufHeader(file, { skipArrays: true }).metadata.get('tokenizer.ggml.tokens')).toEqual([]);
    expect(readGgufHeader(file).metadata.get('tokenizer.ggml.tokens')).toHaveLength(5000);
  });

  it('reads a 5 GB model in a few reads of its header, never its tensors', () => {
    // A header claiming a 5.4 GB F32 matrix, the file made that long without writing it (sparse).
    const file = path.join(home, 'big', 'big.gguf');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const header = ggufBytes({
      'general.architecture': str('llama'), 'llama.context_length': u32(131072), 'tokenizer.ggml.model': str('llama'), 'tokenizer.ggml.tokens': { type: 'array', elem: 'string', value: VOCAB },
      ...shapeKeys('llama', { embedding_length: 4096, 'attention.head_count': 32, block_count: 1, feed_forward_length: 14336 }),
    }, [
      { name: 'token_embd.weight', dims: [4096, 327_680], type: 0, bytes: new Uint8Array(0) },
    ]);
    fs.writeFileSync(file, header);
    fs.truncateSync(file, header.length + 4096 * 327_680 * 4);
    const reads = vi.spyOn(fs, 'readSync');
    try {
      expect(inspectGguf(file)).toMatchObject({ parameters: 4096 * 327_680, bytes: header.length + 4096 * 327_680 * 4, quantization: 'F32', contextLength: 131072, loadable: true });
      const bytesAsked = reads.mock.calls.reduce((a, c) => a + Number((c as unknown[])[3] ?? 0), 0);
      expect(reads).toHaveBeenCalled();
      expect(bytesAsked).toBeLessThan(2 * 1024 * 1024); // the 1 MiB header window, not the 5 GB
    } finally {
      reads.mockRestore();
    }
  });

  it('names Ollama models and formats sizes as the tools do', () => {
    expect(ollamaName(['registry.ollama.ai', 'library', 'llama3.2', '3b'])).toBe('llama3.2:3b');
    expect(ollamaName(['registry.ollama.ai', 'me', 'mine', 'latest'])).toBe('me/mine:latest');
    expect(ollamaName(['hf.co', 'org', 'repo', 'Q8_0'])).toBe('hf.co/org/repo:Q8_0');
    expect([formatParameters(7_615_616_512), formatParameters(135_000_000), formatParameters(260_000), formatParameters(null)]).toEqual(['7.6B', '135M', '260K', '?']);
    expect([formatBytes(4_683_073_184), formatBytes(812_000_000), formatBytes(999)]).toEqual(['4.7 GB', '812 MB', '999 B']);
  });
});

// The graph cache (docs/design.md §Graph cache): a later load reads the graphs and weights an
// earlier one kept, and gets the same outputs; changed weights or config.json, or a damaged
// cache, get a fresh build.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine, type EngineOptions } from '../../src-main/model/inference-engine.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { cachedWeightFolder, defaultGraphCacheRoot, graphCacheRoot } from '../../src-main/model/graph-cache.js';
import { GRAPH_CACHE_FORMAT, graphFingerprint } from '../../src-main/model/graph-fingerprint.js';
import { decodeChunkGraph } from '../../src-main/model/decode-chunk-graph.js';
import { checkpointWeights } from '../../src-main/model/decoder.js';
import { ort } from '../../src-main/model/ort-session.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-graph-cache-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const ROWS = [{ inputIds: [5, 9, 40, 41, 42, 7, 3, 60, 61], responseStart: 4 }];

async function run(dir: string, options: EngineOptions): Promise<{ scores: number[][]; tokens: number[] }> {
  const engine = ModelEngine.open(dir, { threads: 1, ...options });
  try {
    const scores = await engine.score(ROWS);
    const tokens = (await engine.generate(ROWS[0]!.inputIds, { maxNewTokens: 6, stopTokenIds: [] })).tokens;
    return { scores, tokens };
  } finally {
    await engine.close();
  }
}

/** A fixed modification time for a model's weights, which {@link zeroWeightsKeepingIdentity} sets again. */
const MTIME = 1_700_000_000;
function writeModel(name: string, options: Parameters<typeof writeTinyModel>[1]): string {
  const dir = writeTinyModel(path.join(root, name), options).dir;
  fs.utimesSync(path.join(dir, 'model.safetensors'), MTIME, MTIME);
  return dir;
}

/** Overwrites every weight with zeros, keeping the file's size and modification time (so its identity). */
function zeroWeightsKeepingIdentity(dir: string): void {
  const file = path.join(dir, 'model.safetensors');
  const bytes = fs.readFileSync(file);
  const dataStart = 8 + Number(bytes.readBigUInt64LE(0));
  bytes.fill(0, dataStart);
  fs.writeFileSync(file, bytes);
  fs.utimesSync(file, MTIME, MTIME);
}

const mode = (f: string) => fs.statSync(f).mode & 0o777;

describe('the graph cache', () => {
  it('keeps the built graphs and weights, and a later load reads them instead of the checkpoint', async () => {
    const dir = writeModel('llama', { family: 'llama', seed: 5, hiddenSize: 32, intermediateSize: 64 });
    const graphCache = path.join(root, 'cache-a');
    const first = { none: await run(dir, { graphCache }), int8: await run(dir, { graphCache, quantize: 'int8' }) };
    const fp32Folder = cachedWeightFolder(graphCache, Checkpoint.open(dir).identity());
    const int8Folder = cachedWeightFolder(graphCache, Checkpoint.open(dir).identity('int8'));
    expect(fs.readdirSync(graphCache).sort()).toEqual([path.basename(fp32Folder), path.basename(int8Folder)].sort());
    const files = fs.readdirSync(fp32Folder).sort();
    expect(files.map((f) => f.replace(/-[0-9a-f]{16,}\./, '-HASH.'))).toEqual(['generate-HASH.onnx', 'index.json', 'score-HASH.onnx', 'source.json', 'weights-HASH.data']);
    expect(mode(fp32Folder)).toBe(0o700);
    for (const f of files) expect(mode(path.join(fp32Folder, f)), f).toBe(0o600);

    // Same identity, other bytes: only a load that reads the cache still gives the first outputs.
    zeroWeightsKeepingIdentity(dir);
    const second = { none: await run(dir, { graphCache }), int8: await run(dir, { graphCache, quantize: 'int8' }) };
    expect(second).toEqual(first);
    expect(fs.readdirSync(fp32Folder).sort()).toEqual(files);
    // Without the cache the zeroed weights are what is read: the outputs differ.
    const uncached = await run(dir, { graphCache: false });
    expect(uncached.scores).not.toEqual(first.none.scores);
  });

  it('keeps a decode chunk graph (a Loop and its body) like the others, and a change inside its body changes its fingerprint', async () => {
    const dir = writeModel('llama-chunks', { family: 'llama', seed: 8, hiddenSize: 32, intermediateSize: 64 });
    const graphCache = path.join(root, 'cache-chunks');
    const first = await run(dir, { graphCache, decodeInGraph: true });
    const folder = cachedWeightFolder(graphCache, Checkpoint.open(dir).identity());
    expect(fs.readdirSync(folder).filter((f) => f.endsWith('.onnx')).map((f) => f.replace(/-[0-9a-f]{16,}\./, '-HASH.')).sort()).toEqual(['decode_chunk-HASH.onnx', 'score-HASH.onnx']);
    zeroWeightsKeepingIdentity(dir);
    expect(await run(dir, { graphCache, decodeInGraph: true })).toEqual(first);
    // Only the body differs (FusedMatMul or MatMul against transposed keys): the outer graphs are alike.
    const weights = checkpointWeights(Checkpoint.open(dir));
    expect(graphFingerprint(decodeChunkGraph(weights, { fusedScores: true }))).not.toBe(graphFingerprint(decodeChunkGraph(weights, { fusedScores: false })));
    expect(graphFingerprint(decodeChunkGraph(weights, { fusedScores: true }))).toBe(graphFingerprint(decodeChunkGraph(weights, { fusedScores: true })));
  });

  it('builds again, and drops the old folders, when config.json changes', async () => {
    const dir = writeModel('qwen2', { family: 'qwen2', seed: 6, hiddenSize: 32, intermediateSize: 64 });
    const graphCache = path.join(root, 'cache-b');
    const before = await run(dir, { graphCache });
    const oldFolder = cachedWeightFolder(graphCache, Checkpoint.open(dir).identity());
    zeroWeightsKeepingIdentity(dir);
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...config, rms_norm_eps: 1e-5 }));
    const after = await run(dir, { graphCache });
    expect(after.scores).not.toEqual(before.scores); // built from the (zeroed) checkpoint, not the cache
    expect(fs.existsSync(oldFolder)).toBe(false);
    expect(fs.readdirSync(graphCache)).toEqual([path.basename(cachedWeightFolder(graphCache, Checkpoint.open(dir).identity()))]);
  });

  it('rebuilds a cache whose weights file went missing, and removes folders of checkpoints that are gone', async () => {
    const dir = writeTinyModel(path.join(root, 'qwen3'), { family: 'qwen3', tie: true, seed: 7, hiddenSize: 32, intermediateSize: 64 }).dir;
    const graphCache = path.join(root, 'cache-c');
    const first = await run(dir, { graphCache });
    const folder = cachedWeightFolder(graphCache, Checkpoint.open(dir).identity());
    for (const f of fs.readdirSync(folder).filter((f) => f.endsWith('.data'))) fs.rmSync(path.join(folder, f));
    expect(await run(dir, { graphCache })).toEqual(first);

    const gone = writeTinyModel(path.join(root, 'gone'), { family: 'llama', seed: 8 }).dir;
    await run(gone, { graphCache });
    const goneFolder = cachedWeightFolder(graphCache, Checkpoint.open(gone).identity());
    fs.rmSync(gone, { recursive: true });
    const other = writeTinyModel(path.join(root, 'other'), { family: 'llama', seed: 9 }).dir;
    await run(other, { graphCache });
    expect(fs.existsSync(goneFolder)).toBe(false);
    expect(fs.existsSync(folder)).toBe(true);
  });

  it('starts a new folder after an ONNX Runtime upgrade and removes the ones older versions wrote', async () => {
    const dir = writeModel('llama-upgrade', { family: 'llama', seed: 10 });
    const graphCache = path.join(root, 'cache-upgrade');
    const identity = Checkpoint.open(dir).identity();
    // The folders onnxruntime-node 1.23 wrote for this same checkpoint: an older version in
    // source.json (1.23's cache recorded the bare number 2), the same weights.
    const olderFolders = [{ format: 2, identity }, { format: '2/onnxruntime-node 1.23.2', identity }].map((source, i) => {
      const folder = path.join(graphCache, `older-${i}`);
      fs.mkdirSync(folder, { recursive: true });
      fs.writeFileSync(path.join(folder, 'source.json'), JSON.stringify(source));
      return folder;
    });
    const first = await run(dir, { graphCache: false });
    expect(await run(dir, { graphCache })).toEqual(first);
    for (const folder of olderFolders) expect(fs.existsSync(folder), folder).toBe(false);
    const current = cachedWeightFolder(graphCache, identity);
    expect(JSON.parse(fs.readFileSync(path.join(current, 'source.json'), 'utf8')).format)
      .toBe(`${GRAPH_CACHE_FORMAT}/onnxruntime-node ${ort.env.versions.node}`);
  });

  it('goes on without the cache when its folder cannot be made', async () => {
    const dir = writeModel('unwritable', { family: 'llama', seed: 10 });
    const notAFolder = path.join(root, 'a-file');
    fs.writeFileSync(notAFolder, 'x');
    const out = await run(dir, { graphCache: path.join(notAFolder, 'graphs') });
    expect(out).toEqual(await run(dir, { graphCache: false }));
  });

  it('takes its folder from the option, then HINDSIGHT_GRAPH_CACHE, then the OS cache folder', () => {
    const before = process.env.HINDSIGHT_GRAPH_CACHE;
    try {
      expect(graphCacheRoot(false)).toBeUndefined();
      expect(graphCacheRoot('rel/dir')).toBe(path.resolve('rel/dir'));
      process.env.HINDSIGHT_GRAPH_CACHE = 'off';
      expect(graphCacheRoot()).toBeUndefined();
      process.env.HINDSIGHT_GRAPH_CACHE = path.join(root, 'env');
      expect(graphCacheRoot()).toBe(path.join(root, 'env'));
      delete process.env.HINDSIGHT_GRAPH_CACHE;
      expect(graphCacheRoot()).toBe(defaultGraphCacheRoot());
      expect(defaultGraphCacheRoot().endsWith(path.join('hindsight', 'graphs'))).toBe(true);
    } finally {
      if (before === undefined) delete process.env.HINDSIGHT_GRAPH_CACHE;
      else process.env.HINDSIGHT_GRAPH_CACHE = before;
    }
  });
});

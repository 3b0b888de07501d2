// The graph cache (docs/design.md §Graph cache): a later load reads the graphs and weights an
// earlier one kept, and gets the same outputs; changed weights or config.json, or a damaged
// cache, get a fresh build.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine, type EngineOptions } from '../../src-main/model/inference-engine.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { cachedWeightFolder, clearGraphCache, defaultGraphCacheRoot, graphCacheInfo, graphCacheRoot, GRAPH_CACHE_UNUSED_DAYS } from '../../src-main/model/graph-cache.js';
import { runCli } from '../helpers/cli.js';
import { withEnv } from '../helpers/env.js';
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
      const folder = path.join(graphCache, String(i).repeat(24)); // named as every version names its folders
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

  it('lists its folders (model, form, size, last use), removes ones unused for a month, and clears while a model is loaded', async () => {
    const dir = writeModel('llama-listed', { family: 'llama', seed: 11 });
    const graphCache = path.join(root, 'cache-listed');
    const reference = await run(dir, { graphCache: false });
    await run(dir, { graphCache, quantize: 'int8' });
    await run(dir, { graphCache });
    const info = graphCacheInfo(graphCache);
    expect(info.root).toBe(graphCache);
    expect(info.folders.map((f) => [f.model, f.form])).toEqual([[dir, 'fp32'], [dir, 'int8']]); // most recently used first
    for (const f of info.folders) expect(f.bytes).toBe(fs.readdirSync(f.folder).reduce((a, n) => a + fs.statSync(path.join(f.folder, n)).size, 0));
    expect(info.bytes).toBe(info.folders[0]!.bytes + info.folders[1]!.bytes);
    expect(graphCacheInfo(false)).toEqual({ root: null, folders: [], bytes: 0 });

    // A load marks its folder used; one untouched for longer than GRAPH_CACHE_UNUSED_DAYS goes when another is made.
    const int8Folder = info.folders[1]!.folder;
    const old = (Date.now() - (GRAPH_CACHE_UNUSED_DAYS + 1) * 86_400_000) / 1000;
    fs.utimesSync(path.join(int8Folder, 'source.json'), old, old);
    await run(dir, { graphCache });
    expect(fs.existsSync(int8Folder)).toBe(true); // no folder was made: nothing pruned yet
    await run(writeModel('llama-new', { family: 'llama', seed: 12 }), { graphCache });
    expect(fs.existsSync(int8Folder)).toBe(false);
    expect(fs.existsSync(info.folders[0]!.folder)).toBe(true);

    // Cleared under a loaded engine: what it answers stays the same, and a graph it builds later makes its folder again.
    const engine = ModelEngine.open(dir, { threads: 1, graphCache });
    try {
      expect(await engine.score(ROWS)).toEqual(reference.scores);
      const before = graphCacheInfo(graphCache);
      expect(clearGraphCache(graphCache)).toEqual({ removed: 2, bytes: before.bytes, kept: 0 });
      expect(fs.readdirSync(graphCache)).toEqual([]);
      expect(await engine.score(ROWS)).toEqual(reference.scores);
      expect((await engine.generate(ROWS[0]!.inputIds, { maxNewTokens: 6, stopTokenIds: [] })).tokens).toEqual(reference.tokens);
      // The generate graph, built after the clear, is cached again in its folder, made anew.
      expect(fs.readdirSync(graphCache).flatMap((f) => fs.readdirSync(path.join(graphCache, f))).filter((f) => f.startsWith('generate-') && f.endsWith('.onnx'))).toHaveLength(1);
    } finally {
      await engine.close();
    }
    expect(await run(dir, { graphCache })).toEqual(reference);
  });

  it('lists and removes only its own folders: a mistaken root keeps what else is there, links included', async () => {
    const home = path.join(root, 'mistaken-home');
    const documents = path.join(home, 'Documents');
    fs.mkdirSync(documents, { recursive: true });
    fs.writeFileSync(path.join(documents, 'thesis.txt'), 'keep me');
    fs.writeFileSync(path.join(home, 'notes.txt'), 'keep me too');
    const elsewhere = path.join(root, 'elsewhere');
    fs.mkdirSync(elsewhere, { recursive: true });
    fs.writeFileSync(path.join(elsewhere, 'source.json'), JSON.stringify({ format: 'x', identity: '{}' }));
    fs.symlinkSync(elsewhere, path.join(home, 'link'));
    // Named as the cache names its folders, still not its own: a link, and a folder with no source.json.
    fs.symlinkSync(elsewhere, path.join(home, 'a'.repeat(24)));
    fs.mkdirSync(path.join(home, 'b'.repeat(24)));
    const dir = writeModel('llama-home', { family: 'llama', seed: 14 });
    await run(dir, { graphCache: home });
    expect(graphCacheInfo(home).folders.map((f) => f.model)).toEqual([dir]);
    expect(clearGraphCache(home)).toMatchObject({ removed: 1, kept: 0 });
    expect(fs.readdirSync(home).sort()).toEqual(['Documents', 'a'.repeat(24), 'b'.repeat(24), 'link', 'notes.txt']);
    expect(fs.readFileSync(path.join(documents, 'thesis.txt'), 'utf8')).toBe('keep me');
    expect(fs.existsSync(path.join(elsewhere, 'source.json'))).toBe(true);
  });

  it('hindsight cache lists it, and --clear empties it', async () => {
    const graphCache = path.join(root, 'cache-cli');
    const dir = writeModel('llama-cli', { family: 'llama', seed: 13 });
    await run(dir, { graphCache, quantize: 'int4' });
    const db = path.join(root, 'cli.db');
    const cli = (...argv: string[]) => withEnv('HINDSIGHT_GRAPH_CACHE', graphCache, () => runCli(...argv));
    const listed = await cli('cache', '--db', db);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^Graph cache: ${graphCache} \\(1 folder, [\\d.]+ [kM]B\\)\\nFORM +SIZE +LAST USED +MODEL\\nint4 +[\\d.]+ [kM]B +\\d{4}-\\d\\d-\\d\\d +${dir}\\n`));
    const json = (await cli('cache', '--db', db, '--json')).json();
    expect(json).toMatchObject({ root: graphCache, unusedDays: GRAPH_CACHE_UNUSED_DAYS, folders: [{ model: dir, form: 'int4', name: null }] });
    const cleared = await cli('cache', '--clear');
    expect(cleared.stdout).toMatch(/^removed 1 folder\(s\), [\d.]+ [kM]B\n$/);
    expect((await cli('cache', '--db', db)).stdout).toBe(`Graph cache: ${graphCache} (0 folders, 0 B)\nEmpty: a model's converted weights are kept here the first time it answers or trains.\n`);
    expect((await withEnv('HINDSIGHT_GRAPH_CACHE', 'off', () => runCli('cache', '--db', db))).stdout).toMatch(/^The graph cache is off/);
  });
});

// One copy of the weights per process (docs/design.md §Memory): the sessions of one
// checkpoint read one shared external-data file, and compute what sessions with their own
// copies compute.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelEngine } from '../../src-main/model/inference-engine.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { weightFolder } from '../../src-main/model/weight-file.js';
import { cachedWeightFolder } from '../../src-main/model/graph-cache.js';
import { TrainStepEngine } from '../../src-main/train/step-engine.js';
import { LORA, lossConfig, randomLora, sgd, tinyBatch } from '../train/step-helpers.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { withEnv } from '../helpers/env.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-weight-file-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const mappedWeightFiles = () => new Set(fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => /weights-[0-9a-f]+\.data$/.test(l)).map((l) => l.split(/\s+/).slice(5).join(' ')));

/** Runs `f` with HINDSIGHT_GRAPH_CACHE set to `value` (the training step takes the cache from it). */
const withGraphCache = <T>(value: string, f: () => Promise<T>): Promise<T> => withEnv('HINDSIGHT_GRAPH_CACHE', value, f);

describe('the shared weight file', () => {
  // Per process (the graph cache off: a folder removed at exit), and in the graph cache's folder.
  it.each(['per process', 'graph cache'] as const)('serves the training step, its base pass and the score and generate sessions, with the same results as private copies (%s)', (mode) => withGraphCache(mode === 'per process' ? 'off' : path.join(root, 'graphs'), async () => {
    const dir = path.join(root, `qwen3-${mode.replace(' ', '-')}`);
    writeTinyModel(dir, { family: 'qwen3', tie: true, seed: 4, hiddenSize: 16, intermediateSize: 24, headDim: 8, numHeads: 4, numKvHeads: 2 });
    const cacheDir = path.join(root, `cache-${mode.replace(' ', '-')}`);
    fs.mkdirSync(cacheDir);
    const weightsRoot = mode === 'per process' ? cacheDir : path.join(root, 'graphs');
    const folderOf = () => (mode === 'per process' ? weightFolder(Checkpoint.open(dir).identity(), cacheDir) : cachedWeightFolder(weightsRoot, Checkpoint.open(dir).identity()));
    const rows = [{ inputIds: [5, 9, 40, 41, 42, 7, 3], responseStart: 3 }];
    const results = [];
    for (const share of [false, true]) {
      const step = await TrainStepEngine.create(dir, { lora: LORA, loss: lossConfig('rl'), optimizer: sgd(0.1), device: 'cpu', cacheDir, shareWeights: share });
      const engine = ModelEngine.open(dir, { cacheDir, shareWeights: share });
      try {
        const vocab = Checkpoint.open(dir).config.vocabSize;
        const batch = tinyBatch('rl', vocab, 3);
        const weights = randomLora(step.specs, LORA.r, 3);
        const grads = (await step.gradients(batch, weights)).grads;
        const base = await step.baseLogprobs(batch);
        const scores = await engine.score(rows);
        const tokens = (await engine.generate(rows[0]!.inputIds, { maxNewTokens: 5, stopTokenIds: [] })).tokens;
        if (share && process.platform === 'linux') {
          // All four sessions map the one file of this checkpoint.
          const mapped = [...mappedWeightFiles()].filter((f) => f.startsWith(weightsRoot));
          expect(mapped).toHaveLength(1);
          expect(path.dirname(mapped[0]!)).toBe(folderOf());
        }
        results.push({ grads, base, scores, tokens });
      } finally {
        await step.close();
        await engine.close();
      }
    }
    const [own, shared] = results;
    for (const [key, g] of own!.grads) expect(Math.max(...g.map((v, i) => Math.abs(v - shared!.grads.get(key)![i]!)))).toBeLessThan(1e-6);
    expect(Math.max(...own!.base.map((v, i) => Math.abs(v - shared!.base[i]!)))).toBeLessThan(1e-6);
    expect(shared!.scores[0]!.map((v, i) => Math.abs(v - own!.scores[0]![i]!)).every((d) => d < 1e-5)).toBe(true);
    expect(shared!.tokens).toEqual(own!.tokens);
    // Only the shared file and its index stay in the folder (and in the cache, the score and
    // generate graphs); the training step's graphs are removed once loaded.
    const left = fs.readdirSync(folderOf()).sort().map((f) => f.replace(/-[0-9a-f]{16,}\./, '-HASH.'));
    expect(left).toEqual(mode === 'per process' ? ['index.json', 'weights-HASH.data'] : ['generate-HASH.onnx', 'index.json', 'score-HASH.onnx', 'source.json', 'weights-HASH.data']);
  }));

  it('removes the folders of processes that are gone', () => {
    const cacheDir = path.join(root, 'stale');
    const gone = path.join(cacheDir, 'hindsight-weights-999999999');
    fs.mkdirSync(path.join(gone, 'abc'), { recursive: true });
    weightFolder('some checkpoint', cacheDir);
    expect(fs.existsSync(gone)).toBe(false);
    expect(fs.readdirSync(cacheDir)).toEqual([`hindsight-weights-${process.pid}`]);
  });
});

// The memory estimate's part for an on-policy run's rollouts (src-shared/train-memory.ts
// rolloutCacheBytes, docs/design.md §Memory estimate): the generation engine's decode cache,
// - computed from the shape as documented: layers × 2 × kvHeads × headDim × 4 bytes a slot, the
//   max length (or the model's positions) in whole blocks of the cache's SLOT_BLOCK, for
//   contexts × rollouts sequences and the contexts' prompts; with more than one turn, the last
//   turn's sequences again and a prefill piece of every sequence;
// - present only for an on-policy run (the page's config, the CLI's run); an offline run's
//   estimate is what it was;
// - in the host's memory on the CPU and CUDA, not on WebGPU; on a CUDA card the generation
//   session's weights and the chunk graph's copies of the cache;
// - named in the memory line only when present;
// - an on-policy run at the Qwen3-0.6B shape that fitted before is refused, offering a shorter
//   max length that fits its cache too.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { estimateTrainMemory, memoryRunOf, PREFILL_PIECE, rolloutCacheBytes, rolloutsOf, SLOT_BLOCK, type MemoryRun, type ModelShape } from '../../src-shared/train-memory.js';
import { CHUNK_CACHE_COPIES, CUDA_CONTEXT_BYTES, cudaBytes, estimateParts, memoryVerdict, type HostMemory } from '../../src-shared/memory-verdict.js';
import { LORA_TARGETS } from '../../src-shared/training.js';
import { SLOT_BLOCK as CACHE_SLOT_BLOCK } from '../../src-main/model/cache-slots.js';
import { PREFILL_PIECE as ENGINE_PREFILL_PIECE } from '../../src-main/model/batch-decode.js';
import { runCli } from '../helpers/cli.js';
import { MODEL, writeTasks } from '../onpolicy/helpers.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-rollout-memory-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const GiB = 2 ** 30;
const QWEN3_06B: ModelShape = { hiddenSize: 1024, intermediateSize: 3072, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, vocabSize: 151_936, tieWordEmbeddings: true, maxPositionEmbeddings: 40_960 };
const host = (availableGiB: number): HostMemory => ({ totalBytes: 64 * GiB, availableBytes: availableGiB * GiB, source: 'MemAvailable', budgetBytes: null });
/** The on-policy defaults (src-shared/rollout.ts): 4 contexts × 4 rollouts over up to 4 turns, at the app's 2,048 tokens. */
const offline: MemoryRun = { maxLength: 2048, batchSize: 16, loraR: 16, targets: LORA_TARGETS, quantize: 'none', recompute: 'auto', optimizer: 'adamw', teacher: true };
const onPolicy: MemoryRun = { ...offline, rollouts: rolloutsOf(4, 4, 4) };
/** Qwen3-0.6B's bytes a slot: 28 layers × (keys + values) × 8 KV heads × 128 × fp32. */
const SLOT_06B = 28 * 2 * 8 * 128 * 4;

describe("the rollouts' decode cache", () => {
  it('is the shape’s bytes a slot × the max length in whole blocks × (sequences + prompts), and more for later turns', () => {
    expect(SLOT_BLOCK).toBe(CACHE_SLOT_BLOCK);
    expect(PREFILL_PIECE).toBe(ENGINE_PREFILL_PIECE);
    expect(SLOT_06B).toBe(229_376);
    expect(rolloutsOf(4, 4, 1)).toEqual({ sequences: 16, prompts: 4, turns: 1 });
    expect(rolloutCacheBytes(QWEN3_06B, 2048, rolloutsOf(4, 4, 1))).toEqual({ row: SLOT_06B * 2048, cache: SLOT_06B * 2048 * 20 });
    // 1,000 tokens take 32 blocks of 32 slots; past the model's positions, the positions.
    expect(rolloutCacheBytes(QWEN3_06B, 1000, rolloutsOf(2, 3, 1)).cache).toBe(SLOT_06B * 1024 * 8);
    expect(rolloutCacheBytes({ ...QWEN3_06B, maxPositionEmbeddings: 512 }, 2048, rolloutsOf(1, 1, 1)).row).toBe(SLOT_06B * 512);
    // A later turn: its prefill step's new keys and values for a piece of every row, twice (the
    // step's own buffers); 2,048 tokens a step over 16 rows is 128 of each, over 2 rows 512.
    expect(rolloutCacheBytes(QWEN3_06B, 2048, rolloutsOf(4, 4, 2)).cache).toBe(SLOT_06B * (2048 * 20 + 2 * 128 * 16));
    expect(rolloutCacheBytes(QWEN3_06B, 2048, rolloutsOf(1, 2, 2)).cache).toBe(SLOT_06B * (2048 * 3 + 2 * PREFILL_PIECE * 2));
    expect(rolloutCacheBytes(QWEN3_06B, 2048, rolloutsOf(4, 4, 4)).cache).toBe(rolloutCacheBytes(QWEN3_06B, 2048, rolloutsOf(4, 4, 2)).cache);
    expect(rolloutCacheBytes(QWEN3_06B, 256, rolloutsOf(4, 4, 2)).cache).toBe(SLOT_06B * (256 * 20 + 2 * 128 * 16));
    const e = estimateTrainMemory(QWEN3_06B, onPolicy);
    expect(e.rolloutCache / GiB).toBeCloseTo(9.625, 3);
  });

  it('is counted for an on-policy run only: the page’s and an offline run’s estimate are as before', () => {
    const config = { method: 'rl' as const, batchSize: 16, loraR: 16, targets: [...LORA_TARGETS], optimizer: 'adamw' as const, device: 'cpu' as const };
    const settings = { rollouts: 4, contextsPerStep: 3, ppoEpochs: 1, advantage: 'grpo' as const, grpoStd: false, normalizeAdvantages: false, maxTurns: 4, maxTokens: 256 };
    expect(memoryRunOf(config, QWEN3_06B).rollouts).toBeUndefined();
    expect(memoryRunOf({ ...config, onPolicy: settings }, QWEN3_06B)).toMatchObject({ batchSize: 12, rollouts: { sequences: 12, prompts: 3, turns: 4 } });
    const without = estimateTrainMemory(QWEN3_06B, offline), with_ = estimateTrainMemory(QWEN3_06B, onPolicy);
    expect(without.rolloutCache).toBe(0);
    expect(without.total).toBe(without.weights + without.lora + without.activations + without.logits + without.teacher + without.runtime);
    expect(with_.total - without.total).toBe(with_.rolloutCache);
    expect(with_.host - without.host).toBe(with_.rolloutCache);
  });

  it('is in the host’s memory on the CPU and CUDA, on the GPU on WebGPU; a CUDA card adds the generation session and the chunk graph’s copies', () => {
    const on = (device: 'cuda' | 'webgpu', run: MemoryRun) => estimateTrainMemory(QWEN3_06B, { ...run, device, precision: 'fp32' });
    const cuda = on('cuda', onPolicy), webgpu = on('webgpu', onPolicy);
    expect(cuda.host).toBe(cuda.weights + cuda.lora + cuda.runtime + cuda.rolloutCache);
    expect(webgpu.host).toBe(webgpu.weights + webgpu.lora + webgpu.runtime);
    expect(webgpu.total - on('webgpu', offline).total).toBe(webgpu.rolloutCache);
    const cudaRun = { ...onPolicy, device: 'cuda' as const, precision: 'fp32' as const };
    expect(cudaBytes(cuda, cudaRun) - cudaBytes(on('cuda', offline), { ...cudaRun, rollouts: undefined }))
      .toBe(cuda.weights + CHUNK_CACHE_COPIES * SLOT_06B * 2048 * 16);
    expect(cudaBytes(on('cuda', offline), { ...cudaRun, rollouts: undefined })).toBe(2 * cuda.weights + cuda.lora + cuda.activations + cuda.logits + cuda.teacher + CUDA_CONTEXT_BYTES);
  });

  it('is named in the memory line only when present', () => {
    const e = estimateTrainMemory(QWEN3_06B, onPolicy);
    expect(estimateParts(e, onPolicy)).toMatch(/, rollout cache 9\.6 GB for 16 sequences, runtime \d+ MB$/);
    expect(estimateParts(estimateTrainMemory(QWEN3_06B, offline), offline)).not.toContain('rollout');
    const webgpu = { ...onPolicy, device: 'webgpu' as const };
    expect(estimateParts(estimateTrainMemory(QWEN3_06B, webgpu), webgpu)).toContain('rollout cache 9.6 GB for 16 sequences on the GPU');
  });

  it('refuses an on-policy run at the Qwen3-0.6B shape whose cache does not fit, which passed before, offering one turn, fewer contexts and a shorter max length', () => {
    const before = memoryVerdict(QWEN3_06B, offline, host(12), 'cli');
    expect(before.fits).toBe(true);
    const now = memoryVerdict(QWEN3_06B, onPolicy, host(12), 'cli');
    expect(now.fits).toBe(false);
    expect(now.refusal).toMatch(/^This run needs about [\d.]+ GB even with one row of 2,048 tokens at a time, beside its rollouts' cache for 16 sequences, but this machine has 12\.0 GB available of 64\.0 GB: try --contexts-per-step 2 \(about [\d.]+ GB\) or --max-length [\d,]+ \(about [\d.]+ GB\)/);
    // With a little more room one turn an episode fits too, offered first; each suggestion fits
    // where the run did not, and the contexts offered are the most that fit (their rollouts each).
    const roomier = memoryVerdict(QWEN3_06B, onPolicy, host(14), 'cli');
    expect(roomier.refusal).toMatch(/: try --max-turns 1 \(about [\d.]+ GB\) or --contexts-per-step 3 \(about [\d.]+ GB\) or --quantize int4 \(about [\d.]+ GB\), or --ignore-memory to start anyway\.$/);
    const fits = (change: Partial<MemoryRun>) => memoryVerdict(QWEN3_06B, { ...onPolicy, ...change }, host(14), 'cli').fits;
    const withContexts = (c: number) => ({ batchSize: c * 4, rollouts: { ...onPolicy.rollouts!, prompts: c, sequences: c * 4 } });
    expect(fits({ rollouts: { ...onPolicy.rollouts!, turns: 1 } })).toBe(true);
    expect([fits(withContexts(3)), fits(withContexts(4))]).toEqual([true, false]);
    expect(memoryVerdict(QWEN3_06B, onPolicy, host(14), 'app').refusal).toContain(': try Max turns 1 (about');
    const shorter = now.suggestions.find((s) => s.maxLength)!;
    expect(shorter.bytes).toBeLessThanOrEqual(12 * GiB);
    expect(estimateTrainMemory(QWEN3_06B, { ...onPolicy, microBatch: 1, ...shorter }).rolloutCache).toBe(rolloutCacheBytes(QWEN3_06B, shorter.maxLength!, onPolicy.rollouts!).cache);
    // With room for the cache beside the step, the step is split into micro-batches as before.
    const roomy = memoryVerdict(QWEN3_06B, onPolicy, host(28), 'cli');
    expect(roomy.fits).toBe(true);
    expect(roomy.microBatch).toBeLessThan(16);
    expect(roomy.summary).toContain('rollout cache 9.6 GB for 16 sequences');
  });

  it('hindsight train --on-policy prices its rollouts: the memory line names their cache', { timeout: 600_000 }, async () => {
    const tasks = writeTasks(path.join(root, 'tasks.jsonl'), [{ messages: [{ role: 'user', content: 'Tell me a story.' }], answer_regex: 'Lily' }]);
    const out = path.join(root, 'run');
    const r = await runCli('train', '--on-policy', '--model', MODEL, '--out', out, '--tasks', tasks, '--steps', '1', '--rollouts', '2', '--contexts-per-step', '3',
      '--max-turns', '1', '--max-tokens', '8', '--max-length', '128', '--lora-r', '4', '--lora-alpha', '8');
    expect(r.code, r.stderr).toBe(0);
    // stories260K: 5 layers × 2 × 4 KV heads × 8 × 4 bytes a slot, 128 slots, 6 sequences and 3 prompts: 1.4 MB.
    expect(r.stderr).toMatch(/^memory: about \d+ MB \(.*, rollout cache 1 MB for 6 sequences, runtime \d+ MB\);/m);
  });
});

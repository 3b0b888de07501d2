/**
 * The top-K OPD teacher's pass of a training step (docs/design.md §Top-K distillation): one
 * session per K of ./step-graph.ts buildTopKGraph, built on first use, and its answer laid on
 * the batch's [B, T] grid, K entries per cell (./training-step.ts TeacherTopK). The engine
 * (./step-engine.ts) holds one and feeds it the base model (its LoRA as zeros).
 */
import { UserError } from '../../src-shared/types.js';
import type { ort } from '../model/ort-session.js';
import { modelFeeds, pickResponse, toGrid } from './step-feeds.js';
import type { StepBatch, TeacherTopK } from './training-step.js';

export class TopKTeacher {
  private readonly sessions = new Map<number, Promise<ort.InferenceSession>>();

  /** `open(k)` builds the session of the teacher's top k over a vocabulary of `vocabSize`. */
  constructor(private readonly vocabSize: number, private readonly open: (k: number) => Promise<ort.InferenceSession>) {}

  private session(k: number): Promise<ort.InferenceSession> {
    let session = this.sessions.get(k);
    if (!session) {
      if (!Number.isInteger(k) || k < 1 || k > this.vocabSize) throw new UserError(`top-K must be a whole number in [1, ${this.vocabSize}] (the vocabulary), got ${k}`);
      session = this.open(k);
      session.catch(() => this.sessions.delete(k));
      this.sessions.set(k, session);
    }
    return session;
  }

  /**
   * The top k and the targets' log-probs at each response token of the batch (0 elsewhere);
   * `params` the model's LoRA (and value head) feeds. The caller has checked the batch's tokens.
   */
  async score(batch: StepBatch, k: number, params: Record<string, ort.Tensor>): Promise<{ logprobs: Float32Array; topK: TeacherTopK }> {
    const picked = pickResponse(batch);
    const out = await (await this.session(k)).run({ ...modelFeeds(batch, picked), ...params }, ['logprobs', 'topk_logprobs', 'topk_indices']);
    const cells = batch.batch * batch.seqLen;
    const topK: TeacherTopK = { k, logprobs: new Float32Array(cells * k), indices: new Int32Array(cells * k) };
    if (!picked.standIn) {
      const lp = out.topk_logprobs!.data as Float32Array, ids = out.topk_indices!.data as BigInt64Array;
      picked.tokens.forEach((cell, i) => {
        topK.logprobs.set(lp.subarray(i * k, (i + 1) * k), cell * k);
        for (let j = 0; j < k; j++) topK.indices[cell * k + j] = Number(ids[i * k + j]!);
      });
    }
    return { logprobs: toGrid(out.logprobs!.data as Float32Array, picked, batch), topK };
  }

  async close(): Promise<void> {
    for (const pending of this.sessions.values()) await (await pending.catch(() => undefined))?.release();
  }
}

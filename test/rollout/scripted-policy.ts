/**
 * A scripted Policy for the rollout manager's tests: the reply to a prompt is a function of
 * the prompt's text and the sequence's seed, encoded with the real tokenizer of a tiny model
 * and ended with its end-of-turn token; each token's "log-prob" is a number made from the
 * seed and its position, so a test can check that the episode keeps exactly these values.
 * It honours each prompt's budget as the engine does (cut, finish 'length'), records every
 * batch it was asked for and the carried cache rows it was given, and leaves a (one-slot) row
 * per sequence in them as the engine would.
 */
import type { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import type { CarriedRows } from '../../src-main/model/carried-rows.js';
import type { ModelConfig } from '../../src-main/model/hf-checkpoint.js';
import { KvCache } from '../../src-main/model/kv-cache.js';
import type { Policy, PolicyOutput, PolicyPrompt } from '../../src-main/rollout/policy.js';

export type Script = (prompt: string, seed: number) => string;

export class ScriptedPolicy implements Policy {
  readonly batches: PolicyPrompt[][] = [];
  /** The carried rows each batch was given (./carried-rows.ts). */
  readonly carries: (CarriedRows | undefined)[] = [];
  readonly endOfTurn: number;

  constructor(readonly tokenizer: ChatTokenizer, private readonly script: Script, readonly maxPositions = 512, endToken = '<|im_end|>') {
    this.endOfTurn = tokenizer.tokenToId(endToken)!;
  }

  /** The log-prob the policy gives token i of a reply generated with `seed`. */
  static logprob(seed: number, i: number): number {
    return -((seed % 97) + 1) / 100 - i / 1000;
  }

  async generate(prompts: PolicyPrompt[], carry?: CarriedRows): Promise<PolicyOutput[][]> {
    this.batches.push(prompts.map((p) => ({ ...p, promptIds: [...p.promptIds], seeds: [...p.seeds] })));
    this.carries.push(carry);
    // As the engine does: the batch takes the rows it continues, then leaves one per sequence.
    carry?.takeFor(prompts.map((p) => p.promptIds));
    for (const p of prompts) for (const _ of p.seeds) carry?.keep(p.promptIds, KvCache.empty({ numLayers: 1, numKvHeads: 1, headDim: 1 } as ModelConfig, 1), 0);
    return prompts.map((p) => p.seeds.map((seed) => {
      const full = [...this.tokenizer.encode(this.script(this.tokenizer.decode(p.promptIds, false), seed)), this.endOfTurn];
      const tokens = full.slice(0, p.maxNewTokens);
      return { tokens, logprobs: tokens.map((_, i) => ScriptedPolicy.logprob(seed, i)), finishReason: tokens.length < full.length ? 'length' : 'eos' };
    }));
  }
}

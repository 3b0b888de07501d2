/**
 * A scripted Policy for the rollout manager's tests: the reply to a prompt is a function of
 * the prompt's text and the sequence's seed, encoded with the real tokenizer of a tiny model
 * and ended with its end-of-turn token; each token's "log-prob" is a number made from the
 * seed and its position, so a test can check that the episode keeps exactly these values.
 * It honours each prompt's budget as the engine does (cut, finish 'length'), and records
 * every batch it was asked for.
 */
import type { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import type { Policy, PolicyOutput, PolicyPrompt } from '../../src-main/rollout/policy.js';

export type Script = (prompt: string, seed: number) => string;

export class ScriptedPolicy implements Policy {
  readonly batches: PolicyPrompt[][] = [];
  readonly endOfTurn: number;

  constructor(readonly tokenizer: ChatTokenizer, private readonly script: Script, readonly maxPositions = 512, endToken = '<|im_end|>') {
    this.endOfTurn = tokenizer.tokenToId(endToken)!;
  }

  /** The log-prob the policy gives token i of a reply generated with `seed`. */
  static logprob(seed: number, i: number): number {
    return -((seed % 97) + 1) / 100 - i / 1000;
  }

  async generate(prompts: PolicyPrompt[]): Promise<PolicyOutput[][]> {
    this.batches.push(prompts.map((p) => ({ ...p, promptIds: [...p.promptIds], seeds: [...p.seeds] })));
    return prompts.map((p) => p.seeds.map((seed) => {
      const full = [...this.tokenizer.encode(this.script(this.tokenizer.decode(p.promptIds, false), seed)), this.endOfTurn];
      const tokens = full.slice(0, p.maxNewTokens);
      return { tokens, logprobs: tokens.map((_, i) => ScriptedPolicy.logprob(seed, i)), finishReason: tokens.length < full.length ? 'length' : 'eos' };
    }));
  }
}

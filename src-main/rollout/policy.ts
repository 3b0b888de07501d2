/**
 * What the rollout manager generates with (docs/design.md §Rollouts): a `Policy` turns a
 * batch of prompts (token ids, one seed per sequence, a token budget each) into generated
 * tokens with their log-probs and why each stopped. The real one is the model engine with
 * live LoRA inputs ({@link enginePolicy}: `engine.setLora(weights)` between steps changes the
 * policy without rebuilding anything); tests drive the manager with a scripted one.
 */
import type { GeneratedTokens } from '../model/batch-decode.js';
import type { CarriedRows } from '../model/carried-rows.js';
import type { ModelEngine } from '../model/inference-engine.js';
import type { BareCall } from '../model/chat-output.js';
import type { ChatMessage, TemplateOptions } from '../model/tokenizer.js';

/** The tokenizer and chat template a policy's prompts are written with. */
export interface PolicyTokenizer {
  encode(text: string, addSpecialTokens?: boolean): number[];
  decode(ids: number[], skipSpecialTokens?: boolean): string;
  applyChatTemplate(messages: ChatMessage[], options?: TemplateOptions): string;
  readonly eosTokenIds: number[];
  readonly thinkStartId?: number;
  readonly thinkEndId?: number;
  readonly toolCallsId?: number;
  /** How the template asks for tool calls (ChatTokenizer.toolCallDialect): its form of a call without a marker. */
  readonly toolCallDialect?: { readonly bareCall?: BareCall };
}

/** One prompt of a batch: one sequence per seed, each with at most `maxNewTokens` new tokens. */
export interface PolicyPrompt {
  promptIds: number[];
  seeds: number[];
  maxNewTokens: number;
}

/** One generated sequence: `finishReason` 'length' when it ran out of budget (or positions). */
export type PolicyOutput = Pick<GeneratedTokens, 'tokens' | 'logprobs' | 'finishReason'>;

export interface Policy {
  readonly tokenizer: PolicyTokenizer;
  /** Positions the model has: a prompt and its reply fit in them. */
  readonly maxPositions: number;
  /**
   * Every prompt's sequences in one batch; results per prompt, in seed order. `carry` holds the
   * cache rows of the run's previous batch, which prompts that continue a sequence pick up, and
   * takes this batch's (./carried-rows.ts); a policy without a cache ignores it.
   */
  generate(prompts: PolicyPrompt[], carry?: CarriedRows): Promise<PolicyOutput[][]>;
}

export interface Sampling {
  temperature: number;
  topP: number;
}

/**
 * The engine as a policy. Generation stops at the model's end tokens only (no stop strings,
 * so the generated tokens are exactly the sampled ones), and each prompt's budget is capped
 * to the positions it leaves, which ends that sequence with 'length'.
 */
export function enginePolicy(engine: ModelEngine, sampling: Sampling): Policy {
  return {
    tokenizer: engine.tokenizer,
    maxPositions: engine.config.maxPositionEmbeddings,
    async generate(prompts, carry) {
      const out = await engine.generateBatch(prompts.map((p) => ({ promptIds: p.promptIds, seeds: p.seeds, maxNewTokens: p.maxNewTokens })), {
        temperature: sampling.temperature,
        topP: sampling.topP,
        ...(carry ? { carry } : {}),
      });
      return out.map((seqs) => seqs.map(({ tokens, logprobs, finishReason }) => ({ tokens, logprobs, finishReason })));
    },
  };
}

/**
 * The seed of an episode's turn: the episode's own seed for its first reply, then a mix of it
 * with the turn number, so later replies do not replay the first one's random stream.
 */
export function turnSeed(seed: number, turn: number): number {
  if (turn === 0) return seed >>> 0;
  let h = (seed ^ Math.imul(turn, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

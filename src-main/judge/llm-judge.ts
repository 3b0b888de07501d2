/**
 * The LLM judge: docs/design.md §Judges's reward judge and hint judge over any chat model that can
 * complete a conversation — the local model (./local-completer.ts) or an OpenAI-compatible
 * server (./openai-client.ts). Both backends implement `ChatCompleter`; everything about
 * prompts, sampling, votes and parsing lives here once.
 *
 * Each vote is one sampled completion at temperature 0.6 with its own seed, derived from
 * the sample and the vote number, so a re-run with the same model reproduces its votes
 * (where the backend honours seeds: the local model always does).
 */
import type { LabelSource, Vote } from '../../src-shared/types.js';
import type { JudgeBackend, JudgeInput, JudgeOptions, JudgeProvenance, JudgeVerdict } from './verdicts.js';
import type { CompositeThresholds } from '../../src-shared/composite.js';
import { compositeFromVotes, compositeVote } from './composite-votes.js';
import { parseHintAnswer, parseRewardAnswer } from './parse.js';
import { compositePrompt, compositeVersion, hintPrompt, promptVersionFor, REWARD_PROMPT_VERSION, rewardPrompt, type PromptMessage } from './prompts.js';
import { ContextOverflowError, fitPrompt, PromptTooLongError } from './prompt-fit.js';
import { confidenceFromVotes, hintFromVotes, rewardFromVotes, voteEvidence } from './votes.js';

export interface CompletionOptions {
  temperature: number;
  maxTokens: number;
  seed: number;
  signal?: AbortSignal;
}

/** One chat completion: the raw text the model wrote (reasoning included, if any). */
export interface ChatCompleter {
  readonly backend: 'local' | 'openai';
  /** The model's name as labels record it (`judge:<model>`). */
  readonly model: string;
  complete(messages: PromptMessage[], options: CompletionOptions): Promise<string>;
  close(): Promise<void>;
  /** The model's context in tokens, when known (./prompt-fit.ts fits prompts to it). */
  contextTokens?(): number | null;
  /** A prompt's size in tokens as this backend counts it: exact (local) or a conservative estimate. */
  countTokens?(messages: PromptMessage[]): number;
  /** Learns from a server's context-length refusal (its limit, its count) before the one retry. */
  learnContext?(overflow: ContextOverflowError, sent: PromptMessage[]): void;
  /**
   * Whether the judge model reasons before answering even when asked not to (a template that
   * thinks and has no `enable_thinking` switch: R1 distills): it then gets a thinking budget.
   */
  alwaysThinks?(): boolean;
  /** A local model that answers with int8 or int4 weights because fp32 did not fit: why (../model/inference-fit.ts). */
  readonly weightsNote?: string | null;
}

export const JUDGE_TEMPERATURE = 0.6;
/** Room for a short chain of thought before the boxed answer. */
export const DEFAULT_JUDGE_MAX_TOKENS = 512;
/**
 * The default for a judge that always thinks (./local-completer.ts `alwaysThinks`): its
 * reasoning runs to a thousand tokens or more before the answer; a vote cut off before it is
 * unreadable. OpenClaw-RL gives its judge 4096.
 */
export const THINKING_JUDGE_MAX_TOKENS = 4096;

export interface LlmJudgeOptions {
  temperature?: number;
  maxTokens?: number;
  /** The composite reward mode (docs/design.md §Composite score), with its thresholds. */
  composite?: CompositeThresholds;
}

/** FNV-1a: a stable seed per (sample, judge, vote). */
export function voteSeed(sessionId: string, responseTurn: number, judge: 'reward' | 'hint', vote: number): number {
  let h = 0x811c9dc5;
  for (const ch of `${sessionId}\u0000${responseTurn}\u0000${judge}\u0000${vote}`) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) & 0x7fffffff;
}

export class LlmJudge implements JudgeBackend {
  readonly provenance: JudgeProvenance;
  readonly labelSource: LabelSource;
  private readonly temperature: number;
  private readonly maxTokens: number;
  private readonly composite: CompositeThresholds | null;

  constructor(
    readonly completer: ChatCompleter,
    options: LlmJudgeOptions = {},
  ) {
    this.composite = options.composite ? { ...options.composite } : null;
    this.provenance = { backend: completer.backend, model: completer.model, promptVersion: this.rewardVersion() };
    this.labelSource = `judge:${completer.model}`;
    this.temperature = options.temperature ?? JUDGE_TEMPERATURE;
    this.maxTokens = options.maxTokens ?? (completer.alwaysThinks?.() ? THINKING_JUDGE_MAX_TOKENS : DEFAULT_JUDGE_MAX_TOKENS);
  }

  get weightsNote(): string | null {
    return this.completer.weightsNote ?? null;
  }

  /**
   * The m votes on one prompt, fitted to the judge's context (./prompt-fit.ts). A server's
   * context-length 400 is learnt from and the prompt refitted once; a second refusal, or a
   * prompt that cannot fit, is a PromptTooLongError (the runner skips and counts the sample).
   */
  private async votesOn(messages: PromptMessage[], ask: (messages: PromptMessage[], maxTokens: number, i: number) => Promise<string>, m: number): Promise<string[]> {
    const measure = this.completer.contextTokens && this.completer.countTokens ? { contextTokens: () => this.completer.contextTokens!(), countTokens: (p: PromptMessage[]) => this.completer.countTokens!(p) } : null;
    for (let attempt = 0; ; attempt++) {
      const fitted = measure ? fitPrompt(() => messages, 0, measure, this.maxTokens) : { messages, maxTokens: this.maxTokens, promptTokens: 0 };
      try {
        return await Promise.all(Array.from({ length: m }, (_, i) => ask(fitted.messages, fitted.maxTokens, i)));
      } catch (err) {
        if (!(err instanceof ContextOverflowError)) throw err;
        if (attempt === 0 && this.completer.learnContext) {
          this.completer.learnContext(err, fitted.messages);
          continue;
        }
        throw new PromptTooLongError(err.promptTokens ?? fitted.promptTokens, err.limit);
      }
    }
  }

  private rewardVersion(): string {
    return this.composite ? compositeVersion(this.composite) : REWARD_PROMPT_VERSION;
  }

  /** The version stored with labels: the reward prompt's, plus the hint prompt's with hints. */
  promptVersionFor(hints: boolean): string {
    return promptVersionFor(hints, this.rewardVersion());
  }

  async judge(input: JudgeInput, options: JudgeOptions): Promise<JudgeVerdict> {
    const m = Math.max(1, options.votes);
    const ask = (judge: 'reward' | 'hint') => (messages: PromptMessage[], maxTokens: number, i: number) =>
      this.completer.complete(messages, {
        temperature: this.temperature,
        maxTokens,
        seed: voteSeed(input.sessionId, input.responseTurn, judge, i),
        signal: options.signal,
      });
    const rewardMessages = this.composite ? compositePrompt(input) : rewardPrompt(input);
    const hintMessages = options.hints ? hintPrompt(input) : null;
    // All votes at once: the completer bounds how many requests really run together.
    const [rewardRaws, hintRaws] = await Promise.all([
      this.votesOn(rewardMessages, ask('reward'), m),
      hintMessages ? this.votesOn(hintMessages, ask('hint'), m) : Promise.resolve(null),
    ]);
    const composite = this.composite;
    const compositeVotes = composite ? rewardRaws.map((raw) => compositeVote(raw, composite)) : null;
    const votes: Vote[] = rewardRaws.map((raw, i) => {
      const vote: Vote = { raw };
      if (compositeVotes) {
        const { score, reward } = compositeVotes[i]!;
        if (score !== undefined) Object.assign(vote, { score, reward });
      } else {
        const reward = parseRewardAnswer(raw);
        if (reward !== undefined) vote.reward = reward;
      }
      if (hintRaws) {
        const parsed = parseHintAnswer(hintRaws[i]!);
        vote.hintRaw = hintRaws[i]!;
        if (parsed.answer !== undefined) vote.hintAnswer = parsed.answer;
        if (parsed.hint !== undefined) vote.hint = parsed.hint;
      }
      return vote;
    });
    const hint = hintRaws ? hintFromVotes(votes) : null;
    if (composite && compositeVotes) {
      const part = compositeFromVotes(compositeVotes, composite);
      return { reward: part.reward, hint, votes, confidence: part.confidence, evidence: part.evidence, ...(part.composite ? { composite: part.composite } : {}) };
    }
    const reward = rewardFromVotes(votes);
    return { reward, hint, votes, confidence: confidenceFromVotes(votes, reward), evidence: voteEvidence(votes) };
  }

  close(): Promise<void> {
    return this.completer.close();
  }
}

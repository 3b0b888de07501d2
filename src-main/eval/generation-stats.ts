/**
 * Statistics of generated replies (docs/design.md §Evaluation), for replay: fed the replies a
 * model generated for the held-out contexts, one model at a time, it gives the mean reply
 * length, refusal rate, reasoning length and valid tool-call rate, each with its bootstrap
 * interval over replies.
 *
 *     const out = await model.generate(messages, { seed, maxNewTokens: 256 });
 *     replies.push({ content: out.content, reasoning: out.reasoning ?? null, tokens: out.tokens.length,
 *                    toolCalls: out.toolCalls.length, toolCallErrors: out.toolCallErrors.length });
 *     report.stats = generationStats(replies, seed);
 */
import { estimateMean } from '../../src-shared/eval-stats.js';
import type { GenerationStats } from '../../src-shared/eval-report.js';
import { isRefusal } from '../judge/heuristic.js';

/** One generated reply, as LocalModel.generate's result describes it. */
export interface GeneratedReply {
  /** The reply text (reasoning and tool-call markup taken out). */
  content: string;
  reasoning: string | null;
  /** Generated tokens, the end-of-sequence token included when generation stopped on it. */
  tokens: number;
  /** Tool calls that parsed, and tool-call attempts that did not. */
  toolCalls: number;
  toolCallErrors: number;
}

export function generationStats(replies: readonly GeneratedReply[], seed: number): GenerationStats {
  const triedTools = replies.filter((r) => r.toolCalls + r.toolCallErrors > 0);
  return {
    replies: replies.length,
    reply_tokens: estimateMean(replies.map((r) => r.tokens), seed),
    refusal_rate: estimateMean(replies.map((r) => (isRefusal(r.content) ? 1 : 0)), seed),
    reasoning_chars: estimateMean(replies.map((r) => r.reasoning?.length ?? 0), seed),
    valid_tool_call_rate: estimateMean(triedTools.map((r) => (r.toolCallErrors === 0 ? 1 : 0)), seed),
  };
}

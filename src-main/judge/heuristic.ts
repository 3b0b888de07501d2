// The built-in reward judge (docs/design.md §Judges, backend "heuristic"): cue scoring of the
// next state in English, Chinese, Spanish, German and French (cue-scoring.ts: whole words per
// script, phrases before words, negation, contrast, a topic change, conservative on conflict),
// refusal detection on the reply, and error detection on tool output. Deterministic and
// instant, so it labels every sample. Every verdict keeps its evidence (the cues that decided
// it) and a confidence from 0 to 1.
import type { Reward } from '../../src-shared/types.js';
import { scoreCues } from './cue-scoring.js';
import { ENGLISH } from './cues-en.js';
import { CHINESE, FRENCH, GERMAN, SPANISH } from './cues-other.js';

export interface HeuristicVerdict {
  reward: Reward;
  score: number;
  /** How clearly the evidence points to the reward, 0–1 (0 when the reward is 0). */
  confidence: number;
  /** Human-readable cues that decided it, e.g. `-2 "I said"`. */
  evidence: string[];
}

const CUE_SETS = [ENGLISH, CHINESE, SPANISH, GERMAN, FRENCH];

// Refusals in the reply itself (docs/design.md §Judges: counts as -1 whatever the user said next).
const REFUSAL = new RegExp(
  [
    String.raw`\b(?:I\s+(?:cannot|can ?not|can't|can’t)\s+(?:help|assist|do|provide|comply|fulfil|fulfill|create|write|generate|answer|complete|support|share|give)|I\s+cannot\b|I\s+am\s+(?:unable|not able)\s+to|I['’]m\s+(?:unable|not able)\s+to|I\s+(?:won't|will not)\s+be\s+able\s+to)`,
    String.raw`lo siento, (?:pero )?no puedo|ich kann (?:dir )?(?:dabei|damit) nicht helfen|je ne peux pas (?:t'|vous )?aider|我(?:无法|不能)(?:帮助|帮你|提供|回答)`,
  ].join('|'),
  'i',
);

// Tool output that looks like a failure. Negated forms ("0 errors", "no errors") do not count.
const TOOL_ERROR =
  /(?<!\b(?:no|0|zero|without)\s)\b(?:error|errors|exception|traceback|failed|failure|fatal|denied|refused|not found|no such file|undefined|invalid|timed? ?out|segmentation fault|panic(?:ked)?|enoent|eacces|econnrefused|unauthorized|forbidden)\b|\bexit (?:code|status):?\s*[1-9]|\bHTTP\/?\S*\s+[45]\d\d\b|^\S+: \*\*\*/im;

export function isRefusal(reply: string): boolean {
  return REFUSAL.test(reply);
}

export function looksLikeToolError(output: string): boolean {
  return TOOL_ERROR.test(output.slice(0, 4000));
}

/** Scores a user's reaction text: positive means satisfied, negative means corrected. */
export function scoreFeedback(feedback: string): { score: number; reward: Reward; confidence: number; evidence: string[] } {
  return scoreCues(feedback, CUE_SETS);
}

/** The heuristic reward for a reply given its next state. */
export function heuristicReward(reply: string, nextState: { role: 'user' | 'tool'; text: string }): HeuristicVerdict {
  if (isRefusal(reply)) return { reward: -1, score: -1, confidence: 0.9, evidence: ['reply is a refusal'] };
  if (nextState.role === 'tool') {
    // An error is plain evidence; output without one is weaker (it may still be the wrong result).
    return looksLikeToolError(nextState.text)
      ? { reward: -1, score: -1, confidence: 0.8, evidence: ['tool output looks like an error'] }
      : { reward: 1, score: 1, confidence: 0.5, evidence: ['tool returned a result without an error'] };
  }
  return scoreFeedback(nextState.text);
}

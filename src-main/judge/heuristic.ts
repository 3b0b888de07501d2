// The built-in reward judge (docs/design.md §Judges, backend "heuristic"): keyword scoring of the next
// state with word boundaries and negation care, refusal detection on the reply, and error
// detection on tool output. Deterministic and instant, so it labels every sample.
//
// Scoring: each cue found in the user's reaction adds its weight; a sentiment word within
// three words after a negator ("not", "never", "isn't", "doesn't" …) counts with the
// opposite sign ("not working" < 0, "not bad" > 0). The sum's sign is the reward; 0 when
// the cues cancel or none match (the user just moved on with a new topic: ambiguous).
// Words match whole, so "no" never matches "know" or "nothing".
import type { Reward } from '../../src-shared/types.js';

export interface HeuristicVerdict {
  reward: Reward;
  score: number;
  /** Human-readable cues that decided it, e.g. `-2 "I said"`. */
  evidence: string[];
}

interface Cue {
  re: RegExp;
  weight: number;
  /** Sentiment words flip sign when a negator precedes them. */
  negatable?: boolean;
}

const NEGATORS = /\b(?:not|never|no|hardly|isn't|isnt|aren't|wasn't|weren't|doesn't|doesnt|don't|dont|didn't|didnt|won't|can't|cannot|couldn't|shouldn't|wouldn't|ain't)\s+(?:\w+\s+){0,2}$/i;

// Positive reactions: thanks, approval, success.
const POSITIVE: Cue[] = [
  { re: /\bthanks?\b|\bthank you\b|\bthx\b|\bty\b/gi, weight: 1 },
  { re: /\bappreciate(?:d)?\b/gi, weight: 1 },
  { re: /\b(?:perfect|exactly|awesome|excellent|brilliant|amazing|fantastic|wonderful|great|cool|nice|neat|superb|love it|lovely)\b/gi, weight: 1, negatable: true },
  { re: /\b(?:good|correct|helpful|useful|clear|works|worked|working|fixed|solved)\b/gi, weight: 1, negatable: true },
  { re: /\b(?:that's|that is|you're|you are|exactly) right\b/gi, weight: 1 },
  { re: /\b(?:spot on|makes sense|got it|that's it|that did it|that helps|nailed it|well done)\b/gi, weight: 1 },
];

// Negative reactions: corrections, redo and change requests, failures.
const NEGATIVE: Cue[] = [
  // A sentence that opens with "No"/"Nope" is a correction, unless it is "no problem" & co.
  { re: /(?:^|[.!?]\s+|\n)\s*(?:no|nope|nah)\b(?!\s+(?:problem|worries|need|rush|doubt)\b)/gi, weight: -2 },
  { re: /\b(?:wrong|incorrect|mistaken|inaccurate|broken|useless|terrible|awful|bad|worse|confusing|nonsense)\b/gi, weight: -1, negatable: true },
  { re: /\b(?:mistake|error|errors|bug|buggy|fails|failed|failing|crash(?:es|ed)?|hallucinat\w*)\b/gi, weight: -1, negatable: true },
  { re: /\bnot what I\b|\bthat's not\b|\bthat is not\b|\bthis is not\b/gi, weight: -2 },
  { re: /\bI (?:said|meant|asked for|asked you|told you|specifically|explicitly)\b/gi, weight: -2 },
  { re: /\byou (?:forgot|missed|ignored|didn't|did not)\b/gi, weight: -2 },
  { re: /\btoo (?:long|verbose|wordy|lengthy|short|brief|complicated|complex|vague|generic|formal|casual|slow)\b/gi, weight: -2 },
  { re: /\b(?:try again|redo|start over|rewrite it|do it again|once more)\b/gi, weight: -2 },
  { re: /\b(?:doesn't|does not|didn't|did not|won't|will not|don't|do not) work\b/gi, weight: -2 },
  { re: /\binstead\b|\brather than\b/gi, weight: -1 },
  { re: /\b(?:can|could|would) you (?:please )?(?:change|make|rewrite|rephrase|shorten|fix|redo|update|modify|correct|remove)\b/gi, weight: -2 },
  { re: /\bplease (?:use|change|fix|make|rewrite|redo|remove|correct|stop|don't|do not)\b/gi, weight: -1 },
  { re: /\b(?:make|keep) it (?:shorter|longer|simpler|more|less|concise|brief)\b/gi, weight: -2 },
  { re: /\byou should(?:n't| not)?\b|\bshould (?:be|have been|use|return)\b/gi, weight: -1 },
  { re: /\bwhy (?:did|would) you\b/gi, weight: -1 },
  { re: /^\s*actually\b/gi, weight: -1 },
];

// Refusals in the reply itself (docs/design.md §Judges: counts as -1 whatever the user said next).
const REFUSAL =
  /\b(?:I\s+(?:cannot|can ?not|can't|can’t)\s+(?:help|assist|do|provide|comply|fulfil|fulfill|create|write|generate|answer|complete|support|share|give)|I\s+cannot\b|I\s+am\s+(?:unable|not able)\s+to|I['’]m\s+(?:unable|not able)\s+to|I\s+(?:won't|will not)\s+be\s+able\s+to)/i;

// Tool output that looks like a failure. Negated forms ("0 errors", "no errors") do not count.
const TOOL_ERROR =
  /(?<!\b(?:no|0|zero|without)\s)\b(?:error|errors|exception|traceback|failed|failure|fatal|denied|refused|not found|no such file|undefined|invalid|timed? ?out|segmentation fault|panic(?:ked)?|enoent|eacces|econnrefused)\b|\bexit (?:code|status):?\s*[1-9]/i;

export function isRefusal(reply: string): boolean {
  return REFUSAL.test(reply);
}

export function looksLikeToolError(output: string): boolean {
  return TOOL_ERROR.test(output.slice(0, 4000));
}

function normalise(text: string): string {
  return text.replace(/[’‘]/g, "'");
}

function negated(text: string, at: number): boolean {
  const before = text.slice(Math.max(0, at - 40), at);
  return NEGATORS.test(before);
}

/** Scores a user's reaction text: positive means satisfied, negative means corrected. */
export function scoreFeedback(feedback: string): { score: number; evidence: string[] } {
  const text = normalise(feedback);
  let score = 0;
  const evidence: string[] = [];
  for (const cue of [...POSITIVE, ...NEGATIVE]) {
    for (const m of text.matchAll(cue.re)) {
      const flip = cue.negatable && negated(text, m.index ?? 0);
      // "not bad" is mild praise; "not good" is a full complaint.
      const weight = flip ? (cue.weight > 0 ? -Math.max(2, cue.weight) : 1) : cue.weight;
      score += weight;
      const phrase = (flip ? 'not … ' : '') + m[0].trim();
      evidence.push(`${weight > 0 ? '+' : ''}${weight} "${phrase}"`);
    }
  }
  return { score, evidence };
}

/** The heuristic reward for a reply given its next state. */
export function heuristicReward(reply: string, nextState: { role: 'user' | 'tool'; text: string }): HeuristicVerdict {
  if (isRefusal(reply)) return { reward: -1, score: -1, evidence: ['reply is a refusal'] };
  if (nextState.role === 'tool') {
    return looksLikeToolError(nextState.text)
      ? { reward: -1, score: -1, evidence: ['tool output looks like an error'] }
      : { reward: 1, score: 1, evidence: ['tool returned a result without an error'] };
  }
  const { score, evidence } = scoreFeedback(nextState.text);
  const reward: Reward = score > 0 ? 1 : score < 0 ? -1 : 0;
  return { reward, score, evidence: evidence.length ? evidence : ['no feedback cue (ambiguous)'] };
}

// The cue engine behind the heuristic judge (docs/design.md §Judges): finds the cues of every
// language in a user's reaction and weighs them into a score, a reward and a confidence.
//
// Rules, in the order they apply:
// 1. Matching. Latin-script cues match whole words (a letter or digit on either side blocks a
//    match, accented letters included); Chinese cues match as substrings, since Chinese has
//    no spaces. Where two matches overlap, the longer one wins ("not what I wanted" hides
//    "what I wanted", "no problem" hides "no"), so a phrase is read as a phrase.
// 2. Topic change. Text after a marker such as "unrelated:" or "换个话题" asks about
//    something else and says nothing about the reply; its cues are ignored.
// 3. Negation. A negatable cue flips sign when a negator comes shortly before it ("not
//    working", "no funciona", "ça ne marche pas", "没有解决") or, for German and French, shortly
//    after it ("funktioniert nicht", "marche pas"). A flipped positive is a full complaint;
//    a flipped negative is mild praise ("not bad", "不错").
// 4. Contrast. Praise followed by "but", "pero", "aber", "mais", "但是" … is hedged: the praise
//    before the contrast does not count ("looks good but it overlaps on mobile").
// 5. Dominance. The reward is the sign of the sum only when one side outweighs the other at
//    least twofold; otherwise the cues conflict and the reward is 0 (a 0 only loses a sample,
//    a wrong sign trains the wrong thing).
import type { Reward } from '../../src-shared/types.js';

export interface Cue {
  re: RegExp;
  weight: number;
  /** Sentiment words flip sign when a negator is next to them. */
  negatable?: boolean;
}

export interface CueSet {
  cues: Cue[];
  /** Does a negator end the text just before a match? */
  negatedBefore?: (before: string) => boolean;
  /** Does a negator open the text just after a match? */
  negatedAfter?: (after: string) => boolean;
}

export interface CueScore {
  score: number;
  reward: Reward;
  /** 0–1: how clearly the cues point one way (0 for a 0 reward). */
  confidence: number;
  evidence: string[];
}

interface Hit {
  start: number;
  end: number;
  text: string;
  weight: number;
  flipped: boolean;
}

const LETTER = '[\\p{L}\\p{N}_]';

/** A Latin-script alternation that only matches whole words (accented letters included). */
export function words(...phrases: string[]): RegExp {
  return new RegExp(`(?<!${LETTER})(?:${phrases.join('|')})(?!${LETTER})`, 'giu');
}

/** A Chinese alternation: substrings, since the script has no spaces between words. */
export function substrings(...phrases: string[]): RegExp {
  return new RegExp(`(?:${phrases.join('|')})`, 'gu');
}

const TOPIC_CHANGE = new RegExp(
  [
    `(?<!${LETTER})(?:unrelated|different question|separate question|new question|other question|new topic|on another note|changing (?:the )?(?:topic|subject)|`,
    `cambiando de tema|otra pregunta|otro tema|anderes thema|andere frage|themawechsel|autre chose|autre question|changement de sujet|changeons de sujet)(?!${LETTER})|`,
    `换个话题|换个问题|另一个问题|另外一个问题|说点别的|题外话|let's talk about something else`,
  ].join(''),
  'iu',
);

const CONTRAST = new RegExp(`(?<!${LETTER})(?:but|however|though|although|pero|aunque|sin embargo|aber|allerdings|jedoch|mais|sauf que|cependant)(?!${LETTER})|但是|不过|可是`, 'giu');

function collectHits(text: string, sets: readonly CueSet[]): Hit[] {
  const found: (Hit & { set: CueSet; cue: Cue })[] = [];
  for (const set of sets) {
    for (const cue of set.cues) {
      for (const m of text.matchAll(cue.re)) {
        const start = m.index ?? 0;
        found.push({ start, end: start + m[0].length, text: m[0].trim(), weight: cue.weight, flipped: false, set, cue });
      }
    }
  }
  // Longest first, then earliest: a phrase beats the words inside it.
  found.sort((a, b) => b.end - b.start - (a.end - a.start) || a.start - b.start);
  const kept: Hit[] = [];
  for (const h of found) {
    if (kept.some((k) => h.start < k.end && k.start < h.end)) continue;
    h.flipped = !!h.cue.negatable && isNegated(text, h, h.set);
    kept.push(h);
  }
  return kept.sort((a, b) => a.start - b.start);
}

function isNegated(text: string, hit: { start: number; end: number }, set: CueSet): boolean {
  const before = text.slice(Math.max(0, hit.start - 40), hit.start);
  const after = text.slice(hit.end, hit.end + 40);
  return !!set.negatedBefore?.(before) || !!set.negatedAfter?.(after);
}

function effectiveWeight(h: Hit): number {
  if (!h.flipped) return h.weight;
  // "not good" is a full complaint; "not bad" is mild praise.
  return h.weight > 0 ? -Math.max(2, h.weight) : 1;
}

/** Where praise stops counting: the last contrast word that follows some praise. */
function hedgeEnd(text: string, hits: readonly Hit[]): number {
  let end = -1;
  for (const m of text.matchAll(CONTRAST)) {
    const at = m.index ?? 0;
    if (hits.some((h) => h.end <= at && effectiveWeight(h) > 0)) end = at;
  }
  return end;
}

function describe(h: Hit, weight: number, note: string): string {
  const phrase = (h.flipped ? 'negated: ' : '') + h.text;
  return `${weight > 0 ? '+' : ''}${weight} "${phrase}"${note}`;
}

/** Scores a reaction with the given cue sets (all languages at once: no detection needed). */
export function scoreCues(raw: string, sets: readonly CueSet[]): CueScore {
  const text = raw.replace(/[’‘]/g, "'").replace(/[“”]/g, '"');
  const topicAt = text.search(TOPIC_CHANGE);
  const hits = collectHits(topicAt >= 0 ? text.slice(0, topicAt) : text, sets);
  const hedgedBefore = hedgeEnd(text, hits);
  let positive = 0;
  let negative = 0;
  const evidence: string[] = [];
  for (const h of hits) {
    const weight = effectiveWeight(h);
    if (weight > 0 && h.end <= hedgedBefore) {
      evidence.push(describe(h, weight, ' (hedged by a later "but": not counted)'));
      continue;
    }
    if (weight > 0) positive += weight;
    else negative -= weight;
    evidence.push(describe(h, weight, ''));
  }
  if (topicAt >= 0) evidence.push('topic change: the rest is not about the reply');
  return weigh(positive, negative, evidence);
}

function weigh(positive: number, negative: number, evidence: string[]): CueScore {
  const score = positive - negative;
  const dominant = Math.max(positive, negative);
  const other = Math.min(positive, negative);
  if (dominant === 0) return { score, reward: 0, confidence: 0, evidence: evidence.length ? evidence : ['no feedback cue (ambiguous)'] };
  if (dominant < 2 * other) {
    evidence.push(`conflicting cues (+${positive} / -${negative}) → 0`);
    return { score, reward: 0, confidence: 0, evidence };
  }
  const margin = (dominant - other) / (dominant + other);
  const strength = dominant / (dominant + 1);
  const confidence = Math.round(margin * strength * 100) / 100;
  return { score, reward: positive > negative ? 1 : -1, confidence, evidence };
}

// A conversation's content hash (sessions.content_hash): a re-import of an unchanged
// conversation is recognised by it and touches nothing.
import { createHash, type Hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { ImportedConversation, ImportedTurn } from '../../src-shared/types.js';

/**
 * sha256 of everything imported: `JSON.stringify([title, createdAt, turns, alternatives,
 * metadata])`. With `memoKey` (the session's id), the hash's state after each turn is kept for
 * the next call with the same key, which hashes only from the first turn that differs: live
 * capture hashes its session again at every turn, and hashing the whole conversation each time
 * made a turn's cost grow with the session (docs/design.md §Capture log size). The digest is the
 * same either way. A caller that passes a key must not change the turns' objects afterwards: the
 * next call compares its turns with them.
 */
export function contentHash(conv: ImportedConversation, memoKey?: string): string {
  const head = `[${JSON.stringify(conv.title ?? null)},${JSON.stringify(conv.createdAt ?? null)},[`;
  const tail = `],${JSON.stringify(conv.alternatives ?? null)},${JSON.stringify(conv.metadata ?? null)}]`;
  if (memoKey === undefined) return createHash('sha256').update(head).update(conv.turns.map((t) => JSON.stringify(t)).join(',')).update(tail).digest('hex');
  const prior = hashedPrefixes.get(memoKey);
  let same = 0;
  if (prior?.head === head) while (same < conv.turns.length && same < prior.turns.length && sameJson(conv.turns[same], prior.turns[same])) same++;
  // states[i]: the hash of the head and the first i turns, with their commas.
  const states = prior?.head === head ? prior.states.slice(0, same + 1) : [createHash('sha256').update(head)];
  for (let i = states.length - 1; i < conv.turns.length; i++) states.push(states[i]!.copy().update((i ? ',' : '') + JSON.stringify(conv.turns[i])));
  hashedPrefixes.set(memoKey, { head, turns: conv.turns, states });
  return states[conv.turns.length]!.copy().update(tail).digest('hex');
}

/** The conversations hashed last with a memo key (at most 16, the least recent dropped first). */
const hashedPrefixes = new LRUCache<string, { head: string; turns: readonly ImportedTurn[]; states: Hash[] }>({ max: 16 });

/** Whether two values certainly have the same JSON: the same keys in the same order, their values so too. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  if ('toJSON' in a || 'toJSON' in b) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i] || !sameJson((a as Record<string, unknown>)[ka[i]!], (b as Record<string, unknown>)[kb[i]!])) return false;
  return true;
}

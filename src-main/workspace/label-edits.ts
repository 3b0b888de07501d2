// Labels: the user's manual edits, and the verdicts a judge run records (the runner itself
// is src-main/judge/runner.ts; it reads the candidates and writes verdicts through here).
import { UserError, type LabelSource, type Reward } from '../../src-shared/types.js';
import type { JudgeCandidate, LabelPatch, LabelView, VerdictProvenance } from '../../src-shared/views.js';
import type { JudgeInput, JudgeVerdict } from '../judge/verdicts.js';
import { contextMessages, responseMessage } from '../export/formats.js';
import type { Store } from '../store/database.js';
import { readLabel, writeLabel } from '../store/label-rows.js';
import { hasSample, iterateBundles, readSampleTurns, readSessionRecord, type SampleRecord, type SessionBundle, type StoredLabel } from '../store/session-reads.js';
import { nowSeconds } from './clock.js';

export function publicLabel(l: StoredLabel): LabelView {
  return {
    reward: l.reward, hint: l.hint, source: l.source as LabelSource | null, votes: l.votes, confidence: l.confidence, evidence: l.evidence,
    repair: l.repair, notes: l.notes, updatedAt: l.updatedAt, reviewedAt: l.reviewedAt, composite: l.composite,
  };
}

function validReward(value: unknown): value is Reward | null {
  return value === null || value === 1 || value === -1 || value === 0;
}

export function noSession(store: Store, id: string): UserError {
  return new UserError(`no session '${id}' in ${store.path}`);
}

function requireSample(store: Store, sessionId: string, responseTurn: number): void {
  if (hasSample(store, sessionId, responseTurn)) return;
  if (!readSessionRecord(store, sessionId)) throw noSession(store, sessionId);
  const turns = readSampleTurns(store, sessionId);
  const list = turns.length ? `its samples are at turns ${turns.join(', ')}` : 'it has no samples';
  throw new UserError(`session '${sessionId}' has no sample at turn ${responseTurn}; ${list}`);
}

/** A manual label: fields in the patch replace the stored ones, the rest are kept. */
export function setManualLabel(store: Store, sessionId: string, responseTurn: number, patch: LabelPatch): LabelView {
  requireSample(store, sessionId, responseTurn);
  if (patch.reward !== undefined && !validReward(patch.reward)) throw new UserError(`reward must be 1, -1, 0 or null, got ${String(patch.reward)}`);
  const old = readLabel(store, sessionId, responseTurn);
  const clean = (v: string | null | undefined, fallback: string | null) => (v === undefined ? fallback : v === null || v.trim() === '' ? null : v);
  const now = nowSeconds();
  const next: StoredLabel = {
    ...old,
    reward: patch.reward === undefined ? old.reward : patch.reward,
    hint: clean(patch.hint, old.hint),
    repair: clean(patch.repair, old.repair),
    notes: clean(patch.notes, old.notes),
    source: 'manual',
    updatedAt: now,
    // A person wrote it: it is reviewed (docs/design.md §Review).
    reviewedAt: now,
  };
  writeLabel(store, sessionId, responseTurn, next, now);
  store.markDirty();
  return publicLabel(next);
}

/** Stores a judge's verdict unless the sample has a manual label by now; returns whether it did. */
export function recordVerdict(store: Store, sample: { sessionId: string; responseTurn: number }, verdict: JudgeVerdict, provenance: VerdictProvenance): boolean {
  // The user may have labelled this sample while the judge was thinking.
  if (readLabel(store, sample.sessionId, sample.responseTurn).source === 'manual') return false;
  const now = nowSeconds();
  writeLabel(store, sample.sessionId, sample.responseTurn, {
    reward: verdict.reward,
    hint: verdict.hint?.trim() || null,
    source: provenance.labelSource,
    votes: verdict.votes,
    confidence: verdict.confidence ?? null,
    evidence: verdict.evidence ?? [],
    repair: null,
    notes: null,
    updatedAt: now,
    reviewedAt: null,
    composite: verdict.composite ?? null,
    judgeBackend: provenance.backend,
    judgeModel: provenance.model,
    promptVersion: provenance.promptVersion,
  }, now);
  store.markDirty();
  return true;
}

function judgeInput(bundle: SessionBundle, s: SampleRecord): JudgeInput {
  const reply = bundle.turns[s.responseTurn];
  const next = bundle.turns[s.feedbackTurn!];
  return {
    sessionId: bundle.id,
    responseTurn: s.responseTurn,
    context: contextMessages(bundle, s),
    response: reply.text,
    responseMessage: responseMessage(bundle, s),
    nextState: { role: s.nextStateRole!, text: next.text },
  };
}

/** The samples a judge sees (those with a next state), in stable order, with their label's provenance. */
export function judgeCandidates(store: Store): JudgeCandidate[] {
  const out: JudgeCandidate[] = [];
  for (const bundle of iterateBundles(store)) {
    for (const s of bundle.samples) {
      if (s.feedbackTurn === null || s.nextStateRole === null) continue;
      const { source, judgeBackend, judgeModel, promptVersion } = s.label;
      out.push({ input: judgeInput(bundle, s), label: { source, judgeBackend, judgeModel, promptVersion } });
    }
  }
  return out;
}

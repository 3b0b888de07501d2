// What the UI and the CLI show of sessions and samples: views built from store records.
import type { ToolCall } from '../../src-shared/types.js';
import type { SampleView, SessionDetail } from '../../src-shared/views.js';
import type { Store } from '../store/database.js';
import { iterateBundles, readAlternatives, readSamples, readSessionRecord, readTurns, type SampleRecord } from '../store/session-reads.js';
import { noSession, publicLabel } from './label-edits.js';

function sampleView(sessionId: string, turns: { text: string; toolCalls: ToolCall[] }[], s: SampleRecord): SampleView {
  return {
    sessionId, responseTurn: s.responseTurn, feedbackTurn: s.feedbackTurn, nextStateRole: s.nextStateRole,
    response: turns[s.responseTurn].text, responseCalls: viewCalls(turns[s.responseTurn].toolCalls),
    feedback: s.feedbackTurn === null ? null : turns[s.feedbackTurn].text,
    label: publicLabel(s.label),
  };
}

/** A turn's tool calls as a sample view shows them. */
export const viewCalls = (calls: readonly ToolCall[]): SampleView['responseCalls'] => calls.map((c) => ({ name: c.name, arguments: c.arguments }));

export function sessionDetail(store: Store, id: string): Omit<SessionDetail, 'split'> {
  const record = readSessionRecord(store, id);
  if (!record) throw noSession(store, id);
  const turns = readTurns(store, id);
  const samples = readSamples(store, id);
  return {
    id, title: record.title, source: record.format, createdAt: record.createdAt, turnCount: turns.length,
    sampleCount: samples.length, labeledCount: samples.filter((s) => s.label.reward !== null).length,
    noSampleReason: record.noSampleReason,
    tools: (record.tools ?? []).map((t) => ({ name: t.function.name, description: typeof t.function.description === 'string' ? t.function.description : null })),
    turns: turns.map((t) => ({
      index: t.index, role: t.role, text: t.text, reasoning: t.reasoning, toolCalls: t.toolCalls,
      attachments: t.attachments.map((a) => ({ kind: a.kind, ...(a.name !== undefined ? { name: a.name } : {}) })),
      timestamp: t.timestamp, hidden: t.hidden, classification: t.classification, sideReason: t.sideReason,
    })),
    samples: samples.map((s) => sampleView(id, turns, s)),
    alternatives: readAlternatives(store, id).map((a) => ({ atTurn: a.atTurn, text: a.text })),
  };
}

/** Every sample (or one session's), in stable order. */
export function sampleViews(store: Store, sessionId?: string): SampleView[] {
  if (sessionId !== undefined && !readSessionRecord(store, sessionId)) throw noSession(store, sessionId);
  const out: SampleView[] = [];
  for (const bundle of iterateBundles(store, sessionId)) {
    for (const s of bundle.samples) out.push(sampleView(bundle.id, bundle.turns, s));
  }
  return out;
}

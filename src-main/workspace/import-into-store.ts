// Importing opened exports into the store: each conversation is classified here
// (pipeline/classify, with the workspace's context window) and handed to the store, which
// keeps or moves its labels. The caller wraps an import in one transaction.
import path from 'node:path';
import { UserError, type ImportedConversation, type SessionFormat, type SourceFormat } from '../../src-shared/types.js';
import type { ContextWindowSetting, ImportSummary } from '../../src-shared/views.js';
import { analyseSession } from '../pipeline/classify.js';
import type { Store } from '../store/database.js';
import { countTurnsAndSamples } from '../store/session-reads.js';
import { contentHash, sessionIdFor, storedContentHash, writeConversation, type UpsertResult } from '../store/session-writes.js';
import { findSourceId, insertSource, recordSourceTotals } from '../store/source-rows.js';
import { nowSeconds } from './clock.js';

/** What an importer hands over for one input (src-main/import/importer.ts: OpenedExport). */
export interface OpenedExportLike {
  path: string;
  format: SourceFormat;
  sha256: string;
  conversations(): AsyncIterable<ImportedConversation> | Iterable<ImportedConversation>;
  /**
   * File-level and per-conversation warnings (the importer copies each conversation's own
   * warnings here, naming it); complete once `conversations()` is exhausted.
   */
  warnings: string[];
}

export type OpenExportFn = (inputPath: string, format?: SourceFormat | 'auto') => Promise<OpenedExportLike>;

export async function defaultOpenExport(inputPath: string, format?: SourceFormat | 'auto'): Promise<OpenedExportLike> {
  const { openExport } = await import('../import/importer.js');
  return openExport(inputPath, format);
}

/** Turns any error from reading an input into a one-line UserError that names the input. */
export function importError(inputPath: string, err: unknown): UserError {
  const message = (err as Error)?.message ?? String(err);
  const firstLine = message.split('\n')[0];
  const named = firstLine.includes(inputPath) || firstLine.includes(path.basename(inputPath));
  return new UserError(named ? firstLine : `${inputPath}: ${firstLine}`);
}

export function emptySummary(): ImportSummary {
  return { sessions_added: 0, sessions_updated: 0, sessions_unchanged: 0, turns: 0, samples: 0, warnings: [] };
}

/**
 * Adds a conversation, updates it if its content changed (classifying its turns only then),
 * or leaves it alone.
 */
export function upsertConversation(
  store: Store, conv: ImportedConversation, format: SessionFormat, sourceId: number, window: ContextWindowSetting, now: number,
): UpsertResult {
  const id = sessionIdFor(format, conv);
  const hash = contentHash(conv);
  if (storedContentHash(store, id) === hash) return { id, outcome: 'unchanged', labelsKept: 0, labelsDropped: 0 };
  return writeConversation(store, conv, { id, hash, format, sourceId, analysis: analyseSession(conv.turns, window), now });
}

/** Writes one export's conversations into `summary`; returns whether the database changed. */
export async function importOpened(store: Store, opened: OpenedExportLike, summary: ImportSummary, window: ContextWindowSetting): Promise<boolean> {
  const now = nowSeconds();
  const knownSource = findSourceId(store, opened.sha256);
  const newSource = knownSource === undefined;
  const sourceId = knownSource ?? insertSource(store, opened, now);
  let changed = newSource;
  let sessions = 0;
  let turns = 0;
  const seen = new Set<string>();
  for await (const conv of opened.conversations()) {
    const result = upsertConversation(store, conv, opened.format, sourceId, window, now);
    if (result.outcome === 'added') summary.sessions_added++;
    else if (result.outcome === 'updated') summary.sessions_updated++;
    else summary.sessions_unchanged++;
    if (result.outcome !== 'unchanged') changed = true;
    if (result.labelsDropped > 0) {
      summary.warnings.push(`${result.id}: ${result.labelsDropped} label(s) dropped because their reply or its context changed in the newer export`);
    }
    if (seen.has(result.id)) continue;
    seen.add(result.id);
    sessions++;
    const counts = countTurnsAndSamples(store, result.id);
    turns += counts.turns;
    summary.turns += counts.turns;
    summary.samples += counts.samples;
  }
  summary.warnings.push(...opened.warnings);
  if (newSource) recordSourceTotals(store, sourceId, { sessions, turns, warnings: opened.warnings });
  return changed;
}

// Importing opened exports into the store: each conversation is classified here
// (pipeline/classify, with the workspace's context window) and handed to the store, which
// keeps or moves its labels. The caller wraps an import in one transaction.
import path from 'node:path';
import { UserError, type ImportedConversation, type SessionFormat, type SourceFormat } from '../../src-shared/types.js';
import type { ContextWindowSetting, ImportFileResult, ImportSummary } from '../../src-shared/views.js';
import { analyseSession } from '../pipeline/classify.js';
import type { Store } from '../store/database.js';
import { countTurnsAndSamples } from '../store/session-reads.js';
import { contentHash } from '../store/content-hash.js';
import { sessionIdFor, storedContentHash, writeConversation, type UpsertResult } from '../store/session-writes.js';
import { findSourceId, insertSource, recordSourceTotals } from '../store/source-rows.js';
import { nowSeconds } from './clock.js';
import { expandImportPaths, skipReason } from '../import/folder-inputs.js';

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
  return { sessions_added: 0, sessions_updated: 0, sessions_unchanged: 0, turns: 0, samples: 0, warnings: [], files: [], added_ids: [] };
}

/** A file's line in an import's summary that imported nothing: skipped or refused, and why. */
export function notImported(filePath: string, outcome: 'skipped' | 'refused', reason: string): ImportFileResult {
  return { path: filePath, outcome, format: null, reason, sessions_added: 0, sessions_updated: 0, sessions_unchanged: 0, turns: 0, samples: 0, warnings: 0 };
}

/** Adds one file's import (its own summary) to the whole import's, with its line in `files`. */
export function addFileSummary(total: ImportSummary, one: ImportSummary, filePath: string, format: SourceFormat): void {
  total.sessions_added += one.sessions_added;
  total.sessions_updated += one.sessions_updated;
  total.sessions_unchanged += one.sessions_unchanged;
  total.turns += one.turns;
  total.samples += one.samples;
  total.warnings.push(...one.warnings);
  total.added_ids.push(...one.added_ids);
  total.files.push({
    path: filePath, outcome: 'imported', format, reason: null, sessions_added: one.sessions_added, sessions_updated: one.sessions_updated,
    sessions_unchanged: one.sessions_unchanged, turns: one.turns, samples: one.samples, warnings: one.warnings.length,
  });
}

/**
 * Adds a conversation, updates it if its content changed (classifying its turns only then),
 * or leaves it alone.
 */
export function upsertConversation(
  store: Store, conv: ImportedConversation, format: SessionFormat, sourceId: number, window: ContextWindowSetting, now: number,
): UpsertResult {
  const id = sessionIdFor(format, conv);
  // Live capture writes its session again at every turn: the hash continues from the last one's.
  const hash = contentHash(conv, format === 'capture' ? id : undefined);
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
    if (result.outcome === 'added') {
      summary.sessions_added++;
      summary.added_ids.push(result.id);
    }
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

export interface ImportOptions {
  /** The paths were found in a folder the user chose (the Import panel's folder upload): one that is not a chat export is skipped. */
  inFolder?: boolean;
}

/**
 * Imports every input in one transaction: all of them land, or (on any error) none does and
 * the database is left exactly as it was. A folder of exports opens up into its files
 * (import/folder-inputs.ts); one found there that is not a chat export is skipped, with why,
 * where a file given by name stops the import.
 */
export async function importPaths(
  store: Store, openExport: OpenExportFn, paths: readonly string[], format: SourceFormat | 'auto', window: ContextWindowSetting, options: ImportOptions = {},
): Promise<{ summary: ImportSummary; changed: boolean }> {
  if (paths.length === 0) throw new UserError('nothing to import: give at least one file, folder or zip');
  const summary = emptySummary();
  const expanded = await expandImportPaths(paths);
  if (options.inFolder) for (const input of expanded.inputs) input.folder ??= path.dirname(input.path);
  const changed = await store.transactionAsync(async () => {
    let any = false;
    for (const input of expanded.inputs) {
      let opened: OpenedExportLike;
      try {
        opened = await openExport(input.path, format);
      } catch (err) {
        if (input.folder === null) throw importError(input.path, err);
        summary.files.push(notImported(input.path, 'skipped', skipReason(input.path, importError(input.path, err).message)));
        continue;
      }
      const one = emptySummary();
      try {
        any = (await importOpened(store, opened, one, window)) || any;
      } catch (err) {
        throw importError(input.path, err);
      }
      addFileSummary(summary, one, input.path, opened.format);
    }
    return any;
  });
  summary.files.push(...expanded.refused.map((r) => notImported(r.path, 'refused', r.reason)));
  summary.warnings.push(...expanded.notes);
  return { summary, changed };
}

/** Imports one opened export (or hand-made conversations, in tests) in one transaction. */
export async function importOneOpened(store: Store, opened: OpenedExportLike, window: ContextWindowSetting): Promise<{ summary: ImportSummary; changed: boolean }> {
  const summary = emptySummary();
  const one = emptySummary();
  const changed = await store.transactionAsync(async () => {
    try {
      return await importOpened(store, opened, one, window);
    } catch (err) {
      throw importError(opened.path, err);
    }
  });
  addFileSummary(summary, one, opened.path, opened.format);
  return { summary, changed };
}

// The sql.js database behind a workspace: opening (with migrations), typed query helpers,
// transactions, and crash-safe persistence.
//
// sql.js keeps the whole database in memory; the file on disk is only replaced by
// `flush()`, atomically (see atomic-file.ts). Persisting is coalesced: `markDirty()`
// schedules one save after a short quiet period (and at most `maxWaitMs` after the first
// unsaved change), so a burst of label edits in the annotator costs one write instead of
// one per edit. `flush()` saves at once (after imports, before exit); `close()` flushes.
// Until that save, each committed change is in the write journal (write-journal.ts), appended
// and fsynced as it commits, which opening the database replays: what was acknowledged stays.
import fs from 'node:fs';
import type { Database, SqlJsStatic, SqlValue, Statement } from 'sql.js';
import { UserError } from '../../src-shared/types.js';
import { MIGRATIONS } from './migrations.js';
import { loadSqlJs } from './sql-js.js';
import { PRIVATE_FILE_MODE, sweepStaleTempFiles, writeFileAtomicSync } from './atomic-file.js';
import { openForWriting, readDatabaseBytes, realPathOf, removeCreatedDirs, type WriterFootprint } from './db-files.js';
import { JournalWriter, journalPathFor, newSaveNumber, removeJournal, replayJournal, type JournalStatement } from './write-journal.js';

export { loadSqlJs };

export type Params = SqlValue[] | Record<string, SqlValue>;
export type Row = Record<string, SqlValue>;

export interface PersistOptions {
  /** Quiet period after the last change before saving. */
  debounceMs: number;
  /** Longest time a change may stay unsaved while edits keep coming. */
  maxWaitMs: number;
}

export const DEFAULT_PERSIST: PersistOptions = { debounceMs: 300, maxWaitMs: 2000 };

/** Statistics of the persistence layer, for the benchmark and tests. */
export interface PersistStats {
  saves: number;
  lastSaveMs: number;
  totalSaveMs: number;
  bytes: number;
}

const SQLITE_MAGIC = 'SQLite format 3\0';

/** A transaction of more statements is saved whole at its commit (an import, saved at its end anyway), not journaled. */
export const JOURNALED_STATEMENTS_MAX = 2000;

/**
 * 'write': this process may save the database; it holds the database's lock (db-lock.ts)
 * until `close()`. 'read': the database must exist; nothing is ever written, no lock is
 * taken, and migrations run in memory only.
 */
export type StoreAccess = 'write' | 'read';

export class Store {
  private dirty = false;
  private timer: NodeJS.Timeout | null = null;
  private firstDirtyAt = 0;
  private txDepth = 0;
  private closed = false;
  /** The write journal, once this writer's database file exists (a new one's first save creates both). */
  private journal: JournalWriter | null = null;
  /** The open transaction's statements for the journal; null past JOURNALED_STATEMENTS_MAX (its commit saves instead). */
  private pending: JournalStatement[] | null = [];
  /** Prepared statements by SQL text: preparing dominates the cost of small queries. */
  private readonly statements = new Map<string, Statement>();
  readonly persistStats: PersistStats = { saves: 0, lastSaveMs: 0, totalSaveMs: 0, bytes: 0 };

  private constructor(
    readonly path: string,
    readonly db: Database,
    private readonly persist: PersistOptions,
    private readonly writer: WriterFootprint | null,
  ) {}

  /**
   * Opens the database at `dbPath` and brings its schema up to date; for writing, creates it
   * when missing (the file appears at the first save). A file that is not an SQLite
   * database gives a UserError naming it; so does a missing one opened for reading.
   */
  static async open(dbPath: string, persist: PersistOptions = DEFAULT_PERSIST, access: StoreAccess = 'write'): Promise<Store> {
    const SQL = await loadSqlJs();
    // The file itself, not one of its names: a symbolic link shares the lock of the file it
    // points to, and saving replaces that file (the link stays a link).
    const resolved = realPathOf(dbPath);
    if (access === 'read') {
      // A writer killed mid-save (kill -9) left its temp file: any open removes it, not only
      // the next writer's (only files of dead processes go, so this writes nothing of ours).
      sweepStaleTempFiles(resolved, journalPathFor(resolved)); // the journal's too: one killed starting it
      const bytes = readDatabaseBytes(resolved, dbPath);
      if (bytes === null) throw new UserError(`no database at ${dbPath}`);
      return Store.fromBytes(SQL, resolved, dbPath, bytes, persist, null);
    }
    const writer = openForWriting(resolved, dbPath);
    try {
      sweepStaleTempFiles(resolved, journalPathFor(resolved));
      const bytes = readDatabaseBytes(resolved, dbPath);
      return Store.fromBytes(SQL, resolved, dbPath, bytes, persist, writer);
    } catch (err) {
      writer.lock.release();
      if (writer.fileIsNew) removeCreatedDirs(resolved, writer.createdDir);
      throw err;
    }
  }

  private static fromBytes(
    SQL: SqlJsStatic, resolved: string, displayPath: string, bytes: Buffer | null, persist: PersistOptions, writer: WriterFootprint | null,
  ): Store {
    if (bytes && bytes.length > 0 && bytes.subarray(0, 16).toString('latin1') !== SQLITE_MAGIC) {
      throw new UserError(`${displayPath}: not a Hindsight database (not an SQLite file)`);
    }
    let db: Database;
    try {
      db = bytes && bytes.length > 0 ? new SQL.Database(bytes) : new SQL.Database();
      // secure_delete: a deleted session's text is overwritten in the pages that held it, not
      // left in free pages for the next save to write back to disk.
      db.exec('PRAGMA foreign_keys = ON; PRAGMA secure_delete = ON');
    } catch (err) {
      throw new UserError(`${displayPath}: the database is damaged (${(err as Error).message})`);
    }
    const store = new Store(resolved, db, persist, writer);
    const fileExists = bytes !== null && bytes.length > 0;
    // The journal continues the saved file, whose schema it was written in: replayed before migrations.
    const replayed = fileExists && replayJournal(journalPathFor(resolved), store.saveNumber, (statements) => store.transaction(() => {
      for (const [sql, params] of statements) store.run(sql, params);
    }));
    const migrated = store.migrate(displayPath);
    if (writer) {
      // A new database is written at its first save, so a command that fails creates nothing;
      // a journal beside it is an older database's (deleted since), never its own.
      if (!fileExists) removeJournal(journalPathFor(resolved));
      else if (migrated || replayed) store.flush(true);
      else store.journal = JournalWriter.start(journalPathFor(resolved), store.saveNumber);
    }
    return store;
  }

  /** SQLite's user_version in the file's header: the number of the save that wrote it (write-journal.ts). */
  private get saveNumber(): number {
    return (this.db.exec('PRAGMA user_version')[0]?.values[0]?.[0] as number | undefined) ?? 0;
  }

  get readOnly(): boolean {
    return this.writer === null;
  }

  /** Runs the migrations this database has not seen yet. Returns whether any ran. */
  private migrate(displayPath: string): boolean {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)');
    const row = this.get<{ version: number }>('SELECT version FROM schema_version');
    const current = row?.version ?? 0;
    if (current > MIGRATIONS.length) {
      throw new UserError(
        `${displayPath}: database schema version ${current} is newer than this Hindsight supports (${MIGRATIONS.length}); update Hindsight`,
      );
    }
    if (current === MIGRATIONS.length) return false;
    this.transaction(() => {
      for (let v = current; v < MIGRATIONS.length; v++) this.db.exec(MIGRATIONS[v]);
      this.run('DELETE FROM schema_version');
      this.run('INSERT INTO schema_version (version) VALUES (?)', [MIGRATIONS.length]);
    });
    return true;
  }

  get schemaVersion(): number {
    return this.get<{ version: number }>('SELECT version FROM schema_version')?.version ?? 0;
  }

  private prepared(sql: string): Statement {
    let stmt = this.statements.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      this.statements.set(sql, stmt);
    }
    return stmt;
  }

  all<T = Row>(sql: string, params?: Params): T[] {
    const stmt = this.prepared(sql);
    try {
      if (params) stmt.bind(params);
      const rows: T[] = [];
      while (stmt.step()) rows.push(stmt.getAsObject() as T);
      return rows;
    } finally {
      stmt.reset();
    }
  }

  /**
   * Calls `fn` for each row without building an array (for exports of large databases).
   * Uses its own statement, so `fn` may run other queries, even the same one.
   */
  each<T = Row>(sql: string, params: Params | undefined, fn: (row: T) => void): void {
    const stmt = this.db.prepare(sql);
    try {
      if (params) stmt.bind(params);
      while (stmt.step()) fn(stmt.getAsObject() as T);
    } finally {
      stmt.free();
    }
  }

  get<T = Row>(sql: string, params?: Params): T | undefined {
    return this.all<T>(sql, params)[0];
  }

  run(sql: string, params?: Params): void {
    const stmt = this.prepared(sql);
    try {
      stmt.run(params);
    } finally {
      stmt.reset();
    }
    if (!this.journal) return;
    if (this.txDepth === 0) this.journalCommitted([[sql, params]]);
    else if (this.pending && this.pending.length < JOURNALED_STATEMENTS_MAX) this.pending.push([sql, params]);
    else this.pending = null;
  }

  /** Makes a committed change durable: a journal line, or, for one too large or a journal that cannot be written, a save. */
  private journalCommitted(statements: JournalStatement[] | null): void {
    if (statements) {
      try {
        this.journal!.append(statements);
        // Not saved yet: close() and flush() save it even if the caller marks nothing dirty.
        if (!this.dirty) this.firstDirtyAt = Date.now();
        this.dirty = true;
        return;
      } catch {
        // Saving rewrites the file and starts the journal anew; if that fails too, its error says why.
      }
    }
    this.dirty = true;
    this.flush();
  }

  /** Rows changed by the last INSERT/UPDATE/DELETE. */
  changes(): number {
    return this.db.getRowsModified();
  }

  /** Runs `fn` inside BEGIN … COMMIT; any throw rolls everything back. Nests as one. */
  transaction<T>(fn: () => T): T {
    if (this.txDepth > 0) return fn();
    this.begin();
    try {
      const result = fn();
      this.commit();
      return result;
    } catch (err) {
      this.rollback();
      throw err;
    }
  }

  /** The same, for work that awaits (an import reading a stream). */
  async transactionAsync<T>(fn: () => Promise<T>): Promise<T> {
    if (this.txDepth > 0) return fn();
    this.begin();
    try {
      const result = await fn();
      this.commit();
      return result;
    } catch (err) {
      this.rollback();
      throw err;
    }
  }

  private begin(): void {
    this.db.exec('BEGIN');
    this.txDepth = 1;
    this.pending = [];
  }

  private commit(): void {
    this.db.exec('COMMIT');
    this.txDepth = 0;
    // null: too many statements to journal, so journalCommitted saves instead.
    if (this.journal && (this.pending === null || this.pending.length > 0)) this.journalCommitted(this.pending);
    this.pending = [];
  }

  private rollback(): void {
    this.txDepth = 0;
    this.pending = [];
    try {
      this.db.exec('ROLLBACK');
    } catch {
      // SQLite already rolled back (e.g. after a constraint error); nothing left to undo.
    }
  }

  get inTransaction(): boolean {
    return this.txDepth > 0;
  }

  get hasUnsavedChanges(): boolean {
    return this.dirty;
  }

  /** Records an unsaved change and schedules a coalesced save. */
  markDirty(): void {
    if (this.closed) return;
    if (!this.writer) throw new Error(`${this.path} is open for reading only`);
    const now = Date.now();
    if (!this.dirty) this.firstDirtyAt = now;
    this.dirty = true;
    if (this.timer) clearTimeout(this.timer);
    const waitedMs = now - this.firstDirtyAt;
    const delay = Math.max(0, Math.min(this.persist.debounceMs, this.persist.maxWaitMs - waitedMs));
    this.timer = setTimeout(() => this.onTimer(), delay);
    // A pending save must not keep a finished CLI process alive; close() flushes anyway.
    this.timer.unref();
  }

  private onTimer(): void {
    this.timer = null;
    // Never export in the middle of a transaction (an import awaiting its stream): the
    // snapshot would not be a committed state. The commit's caller flushes afterwards.
    if (this.inTransaction) {
      this.timer = setTimeout(() => this.onTimer(), this.persist.debounceMs);
      this.timer.unref();
      return;
    }
    this.flush();
  }

  /** Saves now if anything changed (or if `force`), atomic (atomic-file.ts); a new journal follows unless close() asks none. */
  flush(force = false, journalAfter = true): void {
    if (this.closed || !this.writer) return;
    if (this.inTransaction) throw new Error('flush() inside a transaction would persist uncommitted data');
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (!this.dirty && !force && fs.existsSync(this.path)) return;
    const start = performance.now();
    // The save's number in the file's header, which the journal started after it names.
    const save = newSaveNumber(this.saveNumber);
    this.db.exec(`PRAGMA user_version = ${save}`);
    const bytes = this.db.export();
    writeFileAtomicSync(this.path, bytes, PRIVATE_FILE_MODE);
    this.dirty = false;
    if (journalAfter) this.journal = JournalWriter.start(journalPathFor(this.path), save, this.journal ?? undefined);
    const ms = performance.now() - start;
    this.persistStats.saves += 1;
    this.persistStats.lastSaveMs = ms;
    this.persistStats.totalSaveMs += ms;
    this.persistStats.bytes = bytes.length;
  }

  /** Rewrites the database without its free pages (after a migration dropped data), then saves. */
  compact(): void {
    if (this.inTransaction) throw new Error('compact() inside a transaction');
    this.db.exec('VACUUM');
    if (this.writer) {
      this.markDirty();
      this.flush();
    }
  }

  /** Flushes unsaved changes, frees the in-memory database and releases the lock. */
  close(): void {
    if (this.closed) return;
    if (this.inTransaction) this.rollback();
    this.flush(false, false); // saved: the journal holds nothing the file lacks (one a kill left names another save)
    if (this.journal) removeJournal(this.journal.file);
    this.free();
  }

  /**
   * Closes after a failed command: a database that did not exist before is not created
   * (nor its folders); an existing one is saved as `close()` does.
   */
  closeAfterFailure(): void {
    if (this.closed) return;
    const writer = this.writer;
    if (!writer?.fileIsNew || fs.existsSync(this.path)) {
      this.close();
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.free();
    removeCreatedDirs(this.path, writer.createdDir);
  }

  private free(): void {
    this.closed = true;
    this.journal?.close();
    this.journal = null;
    for (const stmt of this.statements.values()) stmt.free();
    this.statements.clear();
    this.db.close();
    this.writer?.lock.release();
  }
}

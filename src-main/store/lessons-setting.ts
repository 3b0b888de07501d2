// The workspace's lessons (docs/design.md §Lessons), kept in the database's `settings` table
// under 'lessons' as JSON: saved with the database, atomically, so they survive a restart and
// travel with the file. A value that does not read as lessons (a hand-edited mistake) reads as none.
import type { LessonsSource, StoredLessons } from '../../src-shared/lessons.js';
import type { Store } from './database.js';

const KEY = 'lessons';
const SOURCES: readonly LessonsSource[] = ['rules', 'judge', 'edited'];

export function readLessons(store: Store): StoredLessons | null {
  const row = store.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [KEY]);
  if (!row) return null;
  try {
    const v = JSON.parse(row.value) as Partial<StoredLessons>;
    if (typeof v.text !== 'string' || !v.text.trim() || !SOURCES.includes(v.source as LessonsSource)) return null;
    return {
      text: v.text, source: v.source as LessonsSource, judge: typeof v.judge === 'string' ? v.judge : null,
      hints: Number.isInteger(v.hints) ? v.hints! : 0, updatedAt: typeof v.updatedAt === 'number' ? v.updatedAt : 0, note: typeof v.note === 'string' ? v.note : null,
    };
  } catch {
    return null;
  }
}

/** Stores the lessons, or removes them (null, or blank text). */
export function writeLessons(store: Store, lessons: StoredLessons | null): void {
  if (!lessons || !lessons.text.trim()) store.run('DELETE FROM settings WHERE key = ?', [KEY]);
  else store.run('INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)', [KEY, JSON.stringify(lessons)]);
}

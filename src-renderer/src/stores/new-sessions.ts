// Which sessions are new: those an import added, marked "new" on the Sessions list until the
// session is opened (or the user marks them all seen). Kept in this browser's localStorage per
// database, so the marks survive a reload; a database has its own list.
import { defineStore } from 'pinia';

/** The most ids kept; the oldest marks go first. */
const MAX_IDS = 5000;
const keyFor = (dbPath: string) => `hindsight.new-sessions:${dbPath}`;

function read(dbPath: string): string[] {
  try {
    const value = JSON.parse(localStorage.getItem(keyFor(dbPath)) ?? '[]') as unknown;
    return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  } catch {
    return [];
  }
}

export const useNewSessionsStore = defineStore('newSessions', {
  state: () => ({ dbPath: '', ids: [] as string[] }),
  getters: {
    set: (state) => new Set(state.ids),
  },
  actions: {
    /** Switches to a database's list (the app shell calls it when the database is known or changes). */
    use(dbPath: string) {
      if (dbPath === this.dbPath) return;
      this.dbPath = dbPath;
      this.ids = read(dbPath);
    },
    add(ids: readonly string[]) {
      if (!ids.length) return;
      const fresh = new Set(ids);
      this.ids = [...this.ids.filter((id) => !fresh.has(id)), ...ids].slice(-MAX_IDS);
      this.save();
    },
    seen(id: string) {
      if (!this.ids.includes(id)) return;
      this.ids = this.ids.filter((x) => x !== id);
      this.save();
    },
    clear() {
      this.ids = [];
      this.save();
    },
    save() {
      try {
        if (this.dbPath) localStorage.setItem(keyFor(this.dbPath), JSON.stringify(this.ids));
      } catch {
        // A full or disabled storage only loses the marks.
      }
    },
  },
});

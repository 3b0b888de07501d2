// The workspace's context-window setting, kept in the database's `settings` table.
import type { ContextWindowSetting } from '../../src-shared/views.js';
import type { Store } from './database.js';

export function readContextWindow(store: Store): ContextWindowSetting {
  const row = store.get<{ value: string }>("SELECT value FROM settings WHERE key = 'context_window'");
  return row ? (JSON.parse(row.value) as ContextWindowSetting) : {};
}

export function writeContextWindow(store: Store, window: ContextWindowSetting): void {
  store.run("INSERT OR REPLACE INTO settings (key, value) VALUES ('context_window', ?)", [JSON.stringify(window)]);
}

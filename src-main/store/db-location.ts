// Where the app keeps its own database when none is named: the per-user data folder
// (what Electron calls userData), shared by the desktop app and the CLI.
import os from 'node:os';
import path from 'node:path';

/** The per-user data folder; HINDSIGHT_HOME overrides it. */
export function appDataDir(): string {
  if (process.env.HINDSIGHT_HOME !== undefined) return process.env.HINDSIGHT_HOME;
  const home = os.homedir();
  if (process.platform === 'win32') return path.join(process.env.APPDATA ?? path.join(home, 'AppData', 'Roaming'), 'Hindsight');
  if (process.platform === 'darwin') return path.join(home, 'Library', 'Application Support', 'Hindsight');
  return path.join(process.env.XDG_CONFIG_HOME ?? path.join(home, '.config'), 'Hindsight');
}

/** The app's own database in the per-user data folder. */
export function defaultDbPath(): string {
  return path.join(appDataDir(), 'hindsight.db');
}

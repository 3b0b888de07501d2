// What the API needs from the machine the UI runs on: native dialogs and "open this folder".
// The desktop app supplies real ones (src-main/app/electron-host.ts); a browser talking to
// `serve` has none, so those calls answer with a clear "desktop only" error and the UI
// offers a path field or an upload instead.
import { UnavailableError } from './errors.js';

export interface HostBridge {
  readonly nativeDialogs: boolean;
  pickImportFiles(): Promise<string[]>;
  pickSavePath(defaultPath: string): Promise<string | null>;
  pickFolder(title: string): Promise<string | null>;
  pickDatabase(): Promise<string | null>;
  /** Opens a folder in the file manager; resolves false when it could not. */
  openPath(path: string): Promise<boolean>;
}

function desktopOnly(what: string): never {
  throw new UnavailableError(`${what} is only available in the desktop app; in the browser, type a path instead.`);
}

/** The host of `hindsight serve`: the browser may be on another machine, so no dialogs. */
export const browserHost: HostBridge = {
  nativeDialogs: false,
  pickImportFiles: async () => desktopOnly('The file picker'),
  pickSavePath: async () => desktopOnly('The save dialog'),
  pickFolder: async () => desktopOnly('The folder picker'),
  pickDatabase: async () => desktopOnly('The database picker'),
  openPath: async (path) => {
    throw new UnavailableError(`The browser cannot open folders on the server; the folder is ${path}`);
  },
};

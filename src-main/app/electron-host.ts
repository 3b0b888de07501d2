// The desktop host: native dialogs and the file manager, for the API calls that need them.
import { BrowserWindow, dialog, shell } from 'electron';
import type { HostBridge } from '../api/host.js';

export function electronHost(window: () => BrowserWindow | null): HostBridge {
  const parent = () => window() ?? undefined;
  const open = async (options: Electron.OpenDialogOptions) => {
    const win = parent();
    const result = win ? await dialog.showOpenDialog(win, options) : await dialog.showOpenDialog(options);
    return result.canceled ? [] : result.filePaths;
  };
  return {
    nativeDialogs: true,
    pickImportFiles: () =>
      open({
        title: 'Import chat exports',
        properties: ['openFile', 'multiSelections'],
        filters: [
          { name: 'Chat exports', extensions: ['json', 'jsonl', 'zip'] },
          { name: 'All files', extensions: ['*'] },
        ],
      }),
    pickFolder: async (title) => (await open({ title, properties: ['openDirectory', 'createDirectory'] }))[0] ?? null,
    pickDatabase: async () =>
      (await open({ title: 'Open a Hindsight database', properties: ['openFile', 'promptToCreate'], filters: [{ name: 'Hindsight database', extensions: ['db', 'sqlite'] }] }))[0] ?? null,
    pickSavePath: async (defaultPath) => {
      const win = parent();
      const options: Electron.SaveDialogOptions = { title: 'Export to', defaultPath, filters: [{ name: 'JSON Lines', extensions: ['jsonl'] }] };
      const result = win ? await dialog.showSaveDialog(win, options) : await dialog.showSaveDialog(options);
      return result.canceled || !result.filePath ? null : result.filePath;
    },
    openPath: async (target) => (await shell.openPath(target)) === '',
  };
}

// The application menu. File-level commands are forwarded to the UI as `app.command` events:
// the UI owns the dialogs' follow-up (showing the import summary, the export preview).
import { app, dialog, Menu, shell, type MenuItemConstructorOptions } from 'electron';
import path from 'node:path';
import type { ApiEvents } from '../../src-shared/contract.js';

export function buildMenu(options: { send: (command: ApiEvents['app.command']['command']) => void; dbPath: () => string; version: string }): Menu {
  const { send } = options;
  const isMac = process.platform === 'darwin';
  const template: MenuItemConstructorOptions[] = [
    ...(isMac ? [{ role: 'appMenu' as const }] : []),
    {
      label: '&File',
      submenu: [
        { label: 'Import…', accelerator: 'CmdOrCtrl+I', click: () => send('import') },
        { label: 'Export…', accelerator: 'CmdOrCtrl+E', click: () => send('export') },
        { type: 'separator' },
        { label: 'Open database…', accelerator: 'CmdOrCtrl+O', click: () => send('openDatabase') },
        { label: 'Show data folder', click: () => void shell.openPath(path.dirname(options.dbPath())) },
        { type: 'separator' },
        { label: 'Settings', accelerator: 'CmdOrCtrl+,', click: () => send('settings') },
        { type: 'separator' },
        isMac ? { role: 'close' } : { role: 'quit' },
      ],
    },
    { role: 'editMenu' },
    {
      label: '&View',
      submenu: [
        { role: 'reload' },
        ...(app.isPackaged ? [] : [{ role: 'toggleDevTools' as const }]),
        { type: 'separator' },
        { role: 'resetZoom' },
        { role: 'zoomIn' },
        { role: 'zoomOut' },
        { type: 'separator' },
        { role: 'togglefullscreen' },
      ],
    },
    { role: 'windowMenu' },
    {
      role: 'help',
      submenu: [
        {
          label: 'About Hindsight',
          click: () =>
            void dialog.showMessageBox({
              type: 'info',
              title: 'About Hindsight',
              message: `Hindsight ${options.version}`,
              detail: `Turn your chat exports into training data and fine-tune a local model.\nDatabase: ${options.dbPath()}`,
            }),
        },
      ],
    },
  ];
  return Menu.buildFromTemplate(template);
}

// The sandboxed preload: exposes `window.api`, built from the API contract, one method per
// call plus `on(event, listener)`. It never hands the page `ipcRenderer` or any Node power:
// each method sends exactly one named call over one channel, and main validates it again.
//
// Methods resolve to the contract's CallResult envelope ({ok, value} | {ok:false, error})
// rather than throwing, because errors crossing the context bridge lose their fields; the
// renderer's client (src-renderer/src/api/client.ts) unwraps it into values or ApiErrors,
// exactly as it does for the HTTP transport.
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import { CALL_NAMES, EVENT_NAMES, isEventName, type CallResult } from '../../src-shared/contract.js';
import { CALL_CHANNEL, EVENT_CHANNEL } from './channels.js';

const api: Record<string, unknown> = {};
for (const name of CALL_NAMES) {
  api[name] = (input?: unknown): Promise<CallResult<unknown>> => ipcRenderer.invoke(CALL_CHANNEL, name, input ?? {});
}

api.on = (event: unknown, listener: unknown): (() => void) => {
  if (!isEventName(event)) throw new Error(`unknown event '${String(event)}'; known events: ${EVENT_NAMES.join(', ')}`);
  if (typeof listener !== 'function') throw new Error('listener must be a function');
  const handler = (_e: IpcRendererEvent, name: string, payload: unknown) => {
    if (name === event) listener(payload);
  };
  ipcRenderer.on(EVENT_CHANNEL, handler);
  return () => ipcRenderer.removeListener(EVENT_CHANNEL, handler);
};

contextBridge.exposeInMainWorld('api', Object.freeze(api));

// The renderer's one API client. In the desktop app it wraps `window.api` (the preload's
// IPC bridge); in a browser it speaks HTTP + SSE to `hindsight serve`. Both give the same
// typed methods (from the contract) and the same errors, so no view knows which it is on.
import {
  ApiError,
  CALL_NAMES,
  isEventName,
  type ApiErrorBody,
  type CallName,
  type CallResult,
  type EventName,
  type HindsightApi,
} from '../../../src-shared/contract.js';
import { markSignedOut } from './session-state';

type Listener = (payload: unknown) => void;

/** What the preload exposes: each call answers with the contract's result envelope. */
type IpcBridge = Record<CallName, (input?: unknown) => Promise<CallResult<unknown>>> & {
  on(event: EventName, listener: Listener): () => void;
};

function unwrap<T>(result: CallResult<T>): T {
  if (result.ok) return result.value;
  throw new ApiError(result.error);
}

function fromIpc(bridge: IpcBridge): HindsightApi {
  const api: Record<string, unknown> = {};
  for (const name of CALL_NAMES) api[name] = async (input?: unknown) => unwrap(await bridge[name](input ?? {}));
  api.on = (event: EventName, listener: Listener) => bridge.on(event, listener);
  api.onStreamOpen = () => () => undefined; // IPC delivers every event; nothing is ever missed
  return api as HindsightApi;
}

function fromHttp(): HindsightApi {
  const listeners = new Map<EventName, Set<Listener>>();
  const openListeners = new Set<() => void>();
  let source: EventSource | null = null;
  const connect = () => {
    if (source) return;
    // EventSource reconnects by itself after a dropped connection, but gives up for good on an
    // answer that is not a stream: a 401 once serve was restarted with a new token. Then one call
    // finds out why (the banner), and the stream is opened again after a while, in case it was
    // something passing.
    source = new EventSource('api/events');
    source.onopen = () => openListeners.forEach((listener) => listener());
    source.onmessage = (message) => {
      const { name, payload } = JSON.parse(message.data as string) as { name: unknown; payload: unknown };
      if (!isEventName(name)) return;
      for (const listener of listeners.get(name) ?? []) listener(payload);
    };
    source.onerror = () => {
      if (source?.readyState !== EventSource.CLOSED) return;
      source = null;
      call('appInfo').then(() => setTimeout(connect, 3000), () => setTimeout(connect, 10_000));
    };
  };

  const call = async (name: CallName, input?: unknown): Promise<unknown> => {
    let response: Response;
    try {
      response = await fetch(`api/${name}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        credentials: 'same-origin',
        body: JSON.stringify(input ?? {}),
      });
    } catch {
      throw new ApiError({ kind: 'internal', message: 'Cannot reach the Hindsight server. Is `hindsight serve` still running?' });
    }
    let body: CallResult<unknown> | null = null;
    try {
      body = (await response.json()) as CallResult<unknown>;
    } catch {
      if (response.status !== 401) throw new ApiError({ kind: 'internal', message: `The server answered ${response.status} ${response.statusText} without a result.` });
    }
    if (response.status === 401) {
      // serve says why: restarted (this tab's token is an earlier launch's), or never signed in.
      const message = body && !body.ok && body.error.message ? body.error.message : 'This page is not signed in: open the URL that `hindsight serve` printed.';
      markSignedOut(message);
      throw new ApiError({ kind: 'unauthorized', message } satisfies ApiErrorBody);
    }
    return unwrap(body!);
  };

  const api: Record<string, unknown> = {};
  for (const name of CALL_NAMES) api[name] = (input?: unknown) => call(name, input);
  api.on = (event: EventName, listener: Listener) => {
    connect();
    let set = listeners.get(event);
    if (!set) listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  };
  api.onStreamOpen = (listener: () => void) => {
    connect();
    openListeners.add(listener);
    return () => openListeners.delete(listener);
  };
  return api as HindsightApi;
}

function createClient(): HindsightApi {
  const bridge = (window as unknown as { api?: IpcBridge }).api;
  return bridge ? fromIpc(bridge) : fromHttp();
}

export const api: HindsightApi = createClient();

/** A message fit for the UI from anything thrown by a call. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}

export { ApiError };

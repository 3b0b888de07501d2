// One way for tests to call the app's API over HTTP, as the browser UI does: POST /api/<name>
// with the launch's token; a refused call throws with the call's name and the app's message.
import type { ServeHandle } from '../../src-main/api/serve-app.js';

/** Calls the app's API (POST /api/<name>) on a `serve` started in this process. */
export async function api<T = any>(server: Pick<ServeHandle, 'url' | 'token'>, name: string, input: unknown = {}): Promise<T> {
  const res = await fetch(`${server.url}api/${name}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` },
    body: JSON.stringify(input),
  });
  const result = await res.json();
  if (!result.ok) throw new Error(`${name}: ${result.error.message}`);
  return result.value as T;
}

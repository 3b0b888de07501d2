// A tab that outlives a restart of `hindsight serve` (issue 34 item 6): its cookie is the earlier
// launch's, so a page load gets a page that says Hindsight was restarted and how to sign in again
// (no script, its own CSP, a form that takes the printed link or its token), and the running app's
// calls get the same words as JSON; a browser that never signed in gets "Sign in"; a pasted link
// signs in; a wrong token says so. The cookie is named for the port.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { TEST_TIMEOUT_MS } from '../helpers/deadlines.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-signin-'));
const dbPath = path.join(dir, 'signin.db');
let server: ServeHandle | undefined;
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const start = (port = 0) => serveApp({ dbPath, port, buildRenderer: false });

/** fetch, once more when it picked a kept-alive socket of the server that was closed (the restart). */
async function fetch(url: string, init?: RequestInit): Promise<Response> {
  try {
    return await globalThis.fetch(url, init);
  } catch (err) {
    if ((err as { cause?: { code?: string } }).cause?.code !== 'UND_ERR_SOCKET') throw err;
    return globalThis.fetch(url, init);
  }
}

async function signIn(s: ServeHandle, query: string): Promise<{ status: number; cookie: string | null; location: string | null }> {
  const res = await fetch(`${s.url}settings?token=${encodeURIComponent(query)}`, { redirect: 'manual' });
  return { status: res.status, cookie: res.headers.get('set-cookie')?.split(';')[0] ?? null, location: res.headers.get('location') };
}

describe('serve: a tab from an earlier launch', { timeout: TEST_TIMEOUT_MS }, () => {
  it('gets a page and a JSON reason that say Hindsight was restarted, and can sign in again with the pasted link', async () => {
    server = await start();
    const { port } = server;
    const first = await signIn(server, server.token);
    expect(first.status).toBe(303);
    expect(first.location).toBe('/settings');
    expect(first.cookie).toMatch(new RegExp(`^hindsight_token_${port}=`));
    const cookie = first.cookie!;
    const ok = await fetch(`${server.url}api/stats`, { method: 'POST', headers: { 'Content-Type': 'application/json', Cookie: cookie }, body: '{}' });
    expect(ok.status).toBe(200);
    await server.close();

    server = await start(port); // the same port, a new token
    const page = await fetch(`${server.url}settings`, { headers: { Cookie: cookie, Accept: 'text/html' } });
    expect(page.status).toBe(401);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toMatch(/style-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).toContain("form-action 'self'");
    expect(csp).not.toContain('script-src');
    const html = await page.text();
    expect(html).toContain('<main data-signin="expired">');
    expect(html).toContain('<h1>Hindsight was restarted</h1>');
    expect(html).toContain(`It begins with <code>${server.url}?token=</code>`);
    expect(html).toContain('<form method="get" action="/settings"><input name="token"');
    expect(html).not.toContain('<script');
    expect(html).not.toContain(server.token);

    const call = await fetch(`${server.url}api/stats`, { method: 'POST', headers: { 'Content-Type': 'application/json', Cookie: cookie }, body: '{}' });
    expect(call.status).toBe(401);
    expect((await call.json()).error).toEqual({
      kind: 'unauthorized',
      message: 'Hindsight was restarted, so this tab’s access has expired: open the link `hindsight serve` printed when it started, or reload this page to sign in again.',
    });
    const events = await fetch(`${server.url}api/events`, { headers: { Cookie: cookie } });
    expect(events.status).toBe(401);

    // The form sends what was pasted: the whole printed link works, as does the token alone.
    const pasted = await signIn(server, server.loginUrl);
    expect(pasted.status).toBe(303);
    expect(pasted.location).toBe('/settings');
    expect(pasted.cookie).toBe(`hindsight_token_${port}=${server.token}`);
    expect((await signIn(server, ` ${server.token} `)).status).toBe(303);
    const wrong = await fetch(`${server.url}settings?token=${'0'.repeat(48)}`, { redirect: 'manual' });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).toContain('That is not this launch’s access token');
  });

  it('a browser that never signed in gets "Sign in"; a missing asset stays a plain 401; an escaped path in the form', async () => {
    server ??= await start();
    const page = await fetch(`${server.url}`);
    expect(page.status).toBe(401);
    const html = await page.text();
    expect(html).toContain('<h1>Sign in to Hindsight</h1>');
    const call = await fetch(`${server.url}api/stats`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect((await call.json()).error.message).toMatch(/^This tab is not signed in to Hindsight/);
    const asset = await fetch(`${server.url}assets/index.js`);
    expect(asset.status).toBe(401);
    expect(asset.headers.get('content-type')).toMatch(/^text\/plain/);
    const odd = await fetch(`${server.url}a%22%3E%3Cb`);
    expect(await odd.text()).toContain('action="/a%22%3E%3Cb"'); // the path as the URL keeps it (escaped again in the HTML)
  });
});

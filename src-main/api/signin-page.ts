// What `hindsight serve` answers a browser that is not signed in to this launch, instead of a
// bare "Unauthorized" (issue 34 item 6). The browser's access token is made per launch, so a tab
// left open across a restart carries the old launch's cookie: that tab gets a page that says
// Hindsight was restarted and how to get back in (the printed link, or pasting it here); a
// browser with no cookie gets the same steps under "Sign in"; a pasted token that is not this
// launch's says so. The running app's calls get the same words as JSON (http-server.ts), and the
// app shows them in a banner (src-renderer/src/components/SessionBanner.vue).
//
// The page is static HTML with one inline stylesheet, allowed by its hash in this response's own
// Content-Security-Policy; no script. Its form sends the token back to the same page by GET,
// where the usual exchange trades it for the cookie and redirects it out of the address bar.
import crypto from 'node:crypto';
import type http from 'node:http';

export type SignInState = 'expired' | 'signed-out' | 'wrong-token';

/** The one-line reason the app's calls get (and the banner shows). */
export function unauthorizedMessage(state: SignInState): string {
  if (state === 'expired') {
    return 'Hindsight was restarted, so this tab’s access has expired: open the link `hindsight serve` printed when it started, or reload this page to sign in again.';
  }
  return 'This tab is not signed in to Hindsight: open the link `hindsight serve` printed (it carries the access token), or reload this page to sign in.';
}

const STYLE = `
body{margin:0;font:15px/1.55 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1c2230;background:#f6f7fb}
main{max-width:640px;margin:12vh auto 0;padding:28px 32px;background:#fff;border:1px solid #e2e5ee;border-radius:12px}
h1{font-size:22px;margin:0 0 10px}
p,li{margin:8px 0}
ol{padding-left:22px}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace;background:#eef1f7;padding:1px 5px;border-radius:4px}
form{display:flex;gap:8px;margin:8px 0 4px}
input{flex:1;font:inherit;padding:7px 10px;border:1px solid #c9cfdc;border-radius:8px}
button{font:inherit;padding:7px 16px;border:0;border-radius:8px;background:#0f766e;color:#fff;cursor:pointer}
.muted{color:#5b6477;font-size:13px}
.warn{color:#b42318}
`;
const STYLE_HASH = crypto.createHash('sha256').update(STYLE).digest('base64');
const PAGE_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${STYLE_HASH}'`,
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const HEADINGS: Record<SignInState, string> = {
  expired: 'Hindsight was restarted',
  'signed-out': 'Sign in to Hindsight',
  'wrong-token': 'That is not this launch’s access token',
};

const LEADS: Record<SignInState, string> = {
  expired:
    'This tab was signed in to an earlier launch of Hindsight. Each launch of <code>hindsight serve</code> has its own access token, ' +
    'so this tab cannot reach the new one until it signs in again. Nothing is lost: your data is in the database.',
  'signed-out': 'Hindsight lets in only browsers that opened the link it printed: the link carries an access token that is new at every launch.',
  'wrong-token': 'The token given is not the one of the Hindsight that is running now (it was restarted, or the link is from another launch).',
};

/** The sign-in page as HTML; `base` is the server's URL (for the example), `returnTo` the page path the form comes back to. */
export function signInPage(state: SignInState, base: string, returnTo: string): string {
  const action = escape(returnTo.startsWith('/') && !returnTo.startsWith('//') ? returnTo : '/');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Hindsight: ${escape(HEADINGS[state])}</title><style>${STYLE}</style></head>
<body><main data-signin="${state}">
<h1>${escape(HEADINGS[state])}</h1>
<p${state === 'wrong-token' ? ' class="warn"' : ''}>${LEADS[state]}</p>
<ol>
<li>Open the link that <code>hindsight serve</code> printed in its terminal when it started. It begins with <code>${escape(base)}?token=</code>.</li>
<li>Or paste that link, or the token at its end, here:
<form method="get" action="${action}"><input name="token" autocomplete="off" spellcheck="false" aria-label="The link or token hindsight serve printed" placeholder="${escape(base)}?token=…" required><button type="submit">Sign in</button></form></li>
</ol>
<p class="muted">Closed the terminal? Stop Hindsight and start <code>hindsight serve</code> again: it prints a new link. Chat clients that use the API key from Settings → Live capture keep working across restarts.</p>
</main></body></html>
`;
}

/** Sends the sign-in page with status 401 and its own Content-Security-Policy. */
export function sendSignInPage(res: http.ServerResponse, state: SignInState, base: string, returnTo: string): void {
  res.setHeader('Content-Security-Policy', PAGE_CSP);
  res.writeHead(401, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(signInPage(state, base, returnTo));
}

/** The token in what the user pasted: the printed link, or the token alone. */
export function tokenFromPasted(value: string): string {
  const text = value.trim();
  const inLink = /[?&]token=([^&#\s]+)/.exec(text);
  return inLink ? decodeURIComponentSafe(inLink[1]!) : text;
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

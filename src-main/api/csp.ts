// The Content-Security-Policy of the UI, in one place: `serve` sends it as a header, the
// desktop app's app:// protocol sends it as a header, and the built index.html carries it as
// a <meta> tag as a second line of defence. No inline script, no eval, no remote anything.
const DIRECTIVES = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
];

/** For HTTP headers. */
export const CONTENT_SECURITY_POLICY = [...DIRECTIVES, "frame-ancestors 'none'"].join('; ');

/** For the <meta> tag, where frame-ancestors is not allowed. */
export const CONTENT_SECURITY_POLICY_META = DIRECTIVES.join('; ');

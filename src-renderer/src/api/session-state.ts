// Whether this tab is still let in by `hindsight serve` (docs/design.md §API key). Its access
// token is per launch: after a restart every call answers 401, and the event stream closes. The
// client sets `signedOut` with the server's one-line reason; the app shell shows it in a banner
// (components/SessionBanner.vue) instead of leaving each page to fail on its own.
import { reactive } from 'vue';

export const session = reactive({
  /** The server's reason, once a call was refused as unauthorized; null while signed in. */
  signedOut: null as string | null,
});

export function markSignedOut(reason: string): void {
  session.signedOut ??= reason;
}

/**
 * Deadlines for tests that wait on other processes, servers or a browser.
 *
 * Such a test waits for a state (a line printed, a status reached, a file written), never for
 * a length of time: how long a state takes depends on the machine's load, and `npm test` must
 * pass on 2 shared cores with busy loops beside it. The deadlines here only catch hangs, so
 * they are minutes, far beyond any slow-but-working run.
 */

/** How long one wait for a state may take before it counts as a hang. */
export const STATE_TIMEOUT_MS = 5 * 60_000;

/**
 * Vitest's limit for a test (or hook) that waits on states: above STATE_TIMEOUT_MS, so that a
 * hang fails with the message of the wait that hung, which names what it waited for.
 */
export const TEST_TIMEOUT_MS = 2 * STATE_TIMEOUT_MS;

/**
 * Polls `check` until it returns a truthy value, and returns that value. Throws, naming
 * `what`, only after `timeoutMs` (a hang).
 */
export async function waitUntil<T>(what: string, check: () => T | Promise<T>, timeoutMs = STATE_TIMEOUT_MS, pollMs = 50): Promise<NonNullable<T>> {
  const start = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() - start > timeoutMs) throw new Error(`waited ${Math.round(timeoutMs / 1000)} s for ${what} (a hang)`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * Live capture's calls (src-main/capture/): its status as Settings and the app shell's indicator
 * show it, rolling the served adapter back, and the API key of its clients.
 *
 * The API key of live-capture clients (docs/design.md §API key): the key a chat client sends to
 * `/v1` and `/v1/feedback` of `hindsight serve`. It is made once per database, kept 0600 in
 * `<db>.api-key` beside it, and stays the same across launches until the user regenerates it
 * (which revokes the old one at once). The browser's own access token stays per launch.
 * Node-free: the contract spreads CAPTURE_CALLS into its calls.
 */
import { call, returns } from './call-spec.js';
import { boolean, object, optional } from './validate.js';

/** Live capture as the UI shows it (Settings, the indicator in the app shell). */
export interface CaptureStatus {
  /** Capture runs where `hindsight serve` hosts the OpenAI-compatible endpoint. */
  available: boolean;
  reason: string | null;
  enabled: boolean;
  /** The append-only capture log (the source of truth; see src-main/capture/capture-log.ts). */
  logPath: string | null;
  /** Where the background loop writes its adapters (`<db>.capture-adapters/`). */
  adaptersDir: string | null;
  /** The base URL to give chat clients (http://127.0.0.1:PORT/v1); their API key: the `captureKey` call. */
  endpoint: string | null;
  /** Where requests are forwarded, or null when the local model answers. */
  upstream: string | null;
  sessions: number;
  openSessions: number;
  exchanges: number;
  /** Captured samples with a next state and no label yet. */
  pendingJudge: number;
  /** Captured samples labelled ±1 or with a hint that no background run has trained on yet. */
  pendingTrain: number;
  loop: {
    autoJudge: boolean;
    autoTrain: boolean;
    trainEvery: number;
    state: 'off' | 'idle' | 'judging' | 'training' | 'swapping';
    lastError: string | null;
    lastRun: { runId: string; adapterDir: string; samples: number; finishedAt: number } | null;
  };
  /** The adapter the endpoint serves (null = the base model), and the one a rollback returns to. */
  adapter: { active: string | null; previous: string | null; history: string[] };
}

export interface CaptureKeyView {
  /** Only `hindsight serve` hosts /v1; the desktop app has no key. */
  available: boolean;
  /** Why there is no key here, or why the key file was refused (one line); null when all is well. */
  error: string | null;
  /** The file the key is kept in (`<db>.api-key`). */
  path: string | null;
  /** The key's prefix and last characters (`hsk-…3f9a`), to tell keys apart without showing one. */
  hint: string | null;
  /** The whole key: only when asked for (`reveal`), and after Regenerate. */
  key: string | null;
  /** When the key was made (ms since the epoch). */
  createdAt: number | null;
}

export const CAPTURE_CALLS = {
  captureStatus: call('Live capture: on or off, the endpoint, counts, the background loop and the served adapter.', object({}), returns<CaptureStatus>()),
  captureRollback: call('Serves the adapter that was served before the last swap again (the base model when there was none).', object({}), returns<CaptureStatus>()),
  captureKey: call(
    "Live capture's API key for chat clients (/v1): its file and hint, and the key itself with `reveal`; made on first use.",
    object({ reveal: optional(boolean()) }),
    returns<CaptureKeyView>(),
  ),
  captureKeyRegenerate: call(
    'Replaces the API key with a new one: clients that send the old key get 401 from then on. Answers the new key.',
    object({}),
    returns<CaptureKeyView>(),
  ),
};

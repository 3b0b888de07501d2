// Live capture as the app's service sees it (src-main/capture/capture-service.ts under `serve`),
// and what its calls answer where there is none (the desktop app): capture runs only where serve
// hosts the OpenAI-compatible endpoint chat clients talk to.
import type { CaptureKeyView, CaptureStatus, Settings } from '../../src-shared/contract.js';
import { UserError } from '../../src-shared/types.js';
import type { CaptureHook } from '../openai/capture-hook.js';

/** Live capture, where `serve` hosts it (src-main/capture/capture-service.ts). */
export interface CaptureController {
  status(): CaptureStatus;
  rollback(): Promise<CaptureStatus>;
  deleteSession(id: string): { deleted: boolean };
  deleteSessions(ids: readonly string[]): { deleted: number };
  settingsChanged(): void;
  /** The /v1 endpoint's capture hook: the Chat page records through it too. */
  readonly hook: CaptureHook;
  /** The API key capture clients send to /v1 (src-main/capture/capture-key.ts). */
  readonly keys: { view(reveal: boolean): CaptureKeyView; regenerateView(): CaptureKeyView };
}

export const CAPTURE_UNAVAILABLE =
  'Live capture runs under `hindsight serve`, which hosts the OpenAI-compatible endpoint chat clients talk to; start it with `hindsight serve --capture`.';

/** Capture's controller, or the one-line reason there is none. */
export function needCapture(capture: CaptureController | null): CaptureController {
  if (!capture) throw new UserError(CAPTURE_UNAVAILABLE);
  return capture;
}

/** The status where capture cannot run: the stored settings, nothing recorded. */
export function captureStatusOff(s: Settings['capture']): CaptureStatus {
  return {
    available: false, reason: CAPTURE_UNAVAILABLE, enabled: s.enabled, logPath: null, adaptersDir: null, endpoint: null, upstream: s.upstreamBaseUrl || null,
    sessions: 0, openSessions: 0, exchanges: 0, pendingJudge: 0, pendingTrain: 0,
    loop: { autoJudge: s.autoJudge, autoTrain: s.autoTrain, trainEvery: s.trainEvery, state: 'off', lastError: null, lastRun: null },
    adapter: { active: null, previous: null, history: [] },
  };
}

export const CAPTURE_KEY_OFF: CaptureKeyView = { available: false, error: CAPTURE_UNAVAILABLE, path: null, hint: null, key: null, createdAt: null };

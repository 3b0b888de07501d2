// What keeps an LLM judge from running, said once, and what to do about it said per surface
// (docs/design.md §Surfaces): `hindsight judge` names its flags (--timeout-ms, --api-key,
// --model, --judge-model); the app names the judge's fields on its Settings page, where the
// backend, the folder, the URL, the model and the key are chosen. The app's pages show these
// errors on the Settings page itself as well as on others (Evaluate, live capture), so the
// wording names the field without sending the user to a page.
import { SurfaceError, UserError } from '../../src-shared/types.js';

export type JudgeProblem =
  /** The endpoint took longer than the per-request limit. */
  | { kind: 'timeout'; url: string; timeoutMs: number }
  /** HTTP 401/403: the key is missing or wrong. */
  | { kind: 'key-refused'; url: string; status: number; detail: string }
  /** HTTP 404: a base URL without /v1, or a model the server does not have. */
  | { kind: 'not-found'; url: string; model: string; detail: string }
  /** The OpenAI-compatible judge was given no model name. */
  | { kind: 'no-model-name' }
  /** The local judge's folder has no config.json; `flag` is the command line's flag for it. */
  | { kind: 'not-a-model-folder'; dir: string; flag: '--model' | '--judge-model' };

export type JudgeSurface = 'cli' | 'app';

function cliMessage(p: JudgeProblem): string {
  switch (p.kind) {
    case 'timeout':
      return `the OpenAI-compatible endpoint ${p.url} did not answer within ${p.timeoutMs} ms (raise hindsight judge's --timeout-ms for a slow model)`;
    case 'key-refused':
      return `the OpenAI-compatible endpoint ${p.url} refused the API key (HTTP ${p.status}: ${p.detail}); set it with --api-key (judge) or --judge-api-key (eval, train --on-policy)`;
    case 'not-found':
      return `the OpenAI-compatible endpoint ${p.url} answered 404 (${p.detail}): check that the base URL ends in /v1 and that model '${p.model}' exists there`;
    case 'no-model-name':
      return 'the OpenAI-compatible judge needs a model name (e.g. --judge-model qwen2.5:7b-instruct)';
    case 'not-a-model-folder':
      return `${p.dir}: not a model folder (no config.json); give a Hugging Face checkpoint folder or a .gguf file with ${p.flag}`;
  }
}

function appMessage(p: JudgeProblem): string {
  switch (p.kind) {
    case 'timeout':
      return `The judge's endpoint ${p.url} did not answer within ${Math.round(p.timeoutMs / 1000)} s, the app's limit per request. ` +
        "Check that its server is running; if the model is that slow, choose a faster one in the judge's Model field.";
    case 'key-refused':
      return `The judge's endpoint ${p.url} refused the API key (HTTP ${p.status}: ${p.detail}). Enter the right key in the judge's API key field and save the settings.`;
    case 'not-found':
      return `The judge's endpoint ${p.url} answered 404 (${p.detail}). Check that the judge's Endpoint base URL ends in /v1 and that the model '${p.model}' in its Model field exists there.`;
    case 'no-model-name':
      return "The OpenAI-compatible judge has no model name yet: fill in the judge's Model field (e.g. qwen2.5:7b-instruct) and save the settings.";
    case 'not-a-model-folder':
      return `${p.dir} is not a model folder (no config.json). Choose a Hugging Face checkpoint folder or a .gguf file in the Local judge model folder field.`;
  }
}

/** The whole message for one surface. */
export function judgeMessage(problem: JudgeProblem, surface: JudgeSurface): string {
  return surface === 'cli' ? cliMessage(problem) : appMessage(problem);
}

/**
 * The judge's backend is down (an endpoint that stays unreachable or keeps failing after its
 * retries): the run stops. Any other failure on one sample skips that sample (./runner.ts).
 */
export class JudgeBackendDownError extends UserError {}

/** A judge that cannot run. Its message is the command line's; `forApp()` is the app's. */
export class JudgeSetupError extends SurfaceError {
  constructor(readonly problem: JudgeProblem) {
    super(judgeMessage(problem, 'cli'), judgeMessage(problem, 'app'));
  }
}

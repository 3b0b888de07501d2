// Errors the API turns into answers the UI can show, and the one place that maps any thrown
// value to the contract's error body. Both transports use `runCall`, so an error reads the
// same in the desktop app and in the browser.
import { appWording, UserError } from '../../src-shared/types.js';
import { CALLS, isCallName, validateCall, ValidationError, type ApiErrorBody, type ApiHandlers, type CallResult } from '../../src-shared/contract.js';

/** Something this build or this transport cannot do (no native dialogs in a browser). */
export class UnavailableError extends Error {
  override name = 'UnavailableError';
}

export function toErrorBody(err: unknown): ApiErrorBody {
  if (err instanceof ValidationError) return { kind: 'validation', message: err.message, field: err.field };
  if (err instanceof UnavailableError) return { kind: 'unavailable', message: err.message };
  // The app's wording where an error has one (a field, not a CLI flag: docs/design.md §Surfaces).
  if (err instanceof UserError) return { kind: 'user', message: appWording(err) };
  // Anything else is a bug: log the stack for the developer, show the user one line.
  process.stderr.write(`hindsight: internal error: ${(err as Error)?.stack ?? String(err)}\n`);
  return { kind: 'internal', message: `Internal error: ${(err as Error)?.message ?? String(err)}` };
}

/** Validates an untrusted call and runs it. Never throws: the result carries the error. */
export async function runCall(handlers: ApiHandlers, name: unknown, input: unknown): Promise<CallResult<unknown>> {
  if (!isCallName(name)) {
    return { ok: false, error: { kind: 'unknown_call', message: `unknown API call '${String(name).slice(0, 100)}'; known calls: ${Object.keys(CALLS).join(', ')}` } };
  }
  try {
    const valid = validateCall(name, input);
    const handler = handlers[name] as (input: unknown) => Promise<unknown>;
    const value = await handler.call(handlers, valid);
    return { ok: true, value };
  } catch (err) {
    return { ok: false, error: toErrorBody(err) };
  }
}

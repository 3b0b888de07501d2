// Errors of the API contract (./contract.ts), the same over both transports.
// Free of Node and Electron imports, like the contract.
export type ApiErrorKind = 'validation' | 'user' | 'unavailable' | 'unknown_call' | 'unauthorized' | 'internal';

export interface ApiErrorBody {
  kind: ApiErrorKind;
  message: string;
  /** For validation errors: the dotted path of the bad field. */
  field?: string;
}

/** What a transport answers: the output, or an error the UI can show as it is. */
export type CallResult<O> = { ok: true; value: O } | { ok: false; error: ApiErrorBody };

/** An error the back end meant for the user: the UI shows its message. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(readonly body: ApiErrorBody) {
    super(body.message);
  }
  get kind(): ApiErrorKind {
    return this.body.kind;
  }
}

// How the API contract states one call: its input schema (checked at run time), its output
// type (a type only) and one line of docs. Apart from contract.ts so that a group of calls can
// be declared in its own file (src-shared/rollouts-api.ts) and spread into CALLS.
import type { Schema } from './validate.js';

declare const outputBrand: unique symbol;
/** Carries a call's output type without a runtime value. */
export interface Returns<O> {
  readonly [outputBrand]?: O;
}
export const returns = <O>(): Returns<O> => ({});

export interface CallSpec<I, O> {
  input: Schema<I>;
  output: Returns<O>;
  /** One line for the docs and the HTTP index. */
  doc: string;
}
export function call<I, O>(doc: string, input: Schema<I>, output: Returns<O>): CallSpec<I, O> {
  return { doc, input, output };
}

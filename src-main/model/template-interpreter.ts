/**
 * The Jinja interpreter chat templates run in: @huggingface/jinja's, plus the `select` and
 * `reject` filters it lacks (it has `selectattr` and `rejectattr` only), and those two as Jinja
 * has them. Llama 3.1's template needs `reject` for its builtin tools: `builtin_tools |
 * reject('equalto', 'code_interpreter')`. Mistral's templates check that roles alternate over
 * `messages | selectattr("tool_calls", "undefined")`, which the library (0.5.11) makes empty: it
 * fails every item that lacks the attribute, whatever the test, so the check never ran.
 *
 * As in Jinja, `select(test, *args)` keeps the items for which the named test passes (with
 * the items as its first argument and `args` after it), `reject` keeps the others, and with
 * no test name each item's own truth decides; `selectattr(attr, test, *args)` and `rejectattr`
 * do the same with each item's attribute, an undefined value where the item has none. Tests
 * are the library's (`equalto`, `eq`, `string`, `none`, `undefined`, …). Everything else is
 * the library's own filter code.
 *
 * And string filters over an undefined value, as Jinja's default Undefined has them: it reads
 * as '' (`trim`, `upper`, `lower`, `capitalize`, `title`, `string`) and has length 0, where the
 * library refuses ("Cannot apply filter "trim" to type: UndefinedValue"). Hermes 3's tool-use
 * template writes `param_fields.description|trim` for every parameter, described or not.
 *
 * The library declares its filter hook private; the subclass below reaches it through an
 * untyped view of the class, and calls the library for every other filter.
 */
import { Environment, Interpreter } from '@huggingface/jinja';
import { UserError } from '../../src-shared/types.js';

/** A template's own `raise_exception(message)`. */
export class TemplateRaise extends Error {
  constructor(readonly raised: string) {
    super(`the template raised an error: ${raised}`);
  }
}

/** A conversation the chat template could not render; `raised` is the template's own refusal, when it was one. */
export class ChatTemplateError extends UserError {
  readonly raised?: string;
  constructor(readonly detail: Error) {
    super(`chat template failed to render: ${detail.message}`);
    if (detail instanceof TemplateRaise) this.raised = detail.raised;
  }
}

/** The little of @huggingface/jinja's runtime values and AST nodes these filters touch. */
interface RuntimeValue {
  type: string;
  value: unknown;
  __bool__(): { value: boolean };
}
interface FilterNode {
  type: string;
  value?: string;
  callee?: { type: string; value?: string };
  args?: unknown[];
}
type Test = (...values: RuntimeValue[]) => boolean;

interface InterpreterInternals {
  applyFilter(operand: RuntimeValue, filterNode: FilterNode, environment: Environment): RuntimeValue;
  evaluate(node: unknown, environment: Environment): RuntimeValue;
}
const LibraryInterpreter = Interpreter as unknown as new (env: Environment) => InterpreterInternals & { run(program: unknown): RuntimeValue };

/** The filters done here, and whether each keeps the items that pass (select) and reads an attribute. */
const SELECTING_FILTERS: ReadonlyMap<string, { keep: boolean; byAttribute: boolean }> = new Map([
  ['select', { keep: true, byAttribute: false }],
  ['reject', { keep: false, byAttribute: false }],
  ['selectattr', { keep: true, byAttribute: true }],
  ['rejectattr', { keep: false, byAttribute: true }],
]);

/** The filters that read an undefined value as Jinja's Undefined does: as '' (its length, 0). */
const UNDEFINED_AS_EMPTY: ReadonlySet<string> = new Set(['trim', 'upper', 'lower', 'capitalize', 'title', 'string', 'length', 'count']);

/** A filter's name, bare (`trim`) or called (`trim()`). */
function filterName(node: FilterNode): string | undefined {
  return node.type === 'Identifier' ? node.value : node.type === 'CallExpression' && node.callee?.type === 'Identifier' ? node.callee.value : undefined;
}

/** The filter's name when it is one of SELECTING_FILTERS (bare or called), else null. */
function selectingFilter(node: FilterNode): string | null {
  const name = filterName(node);
  return name !== undefined && SELECTING_FILTERS.has(name) ? name : null;
}

/** An object's attributes, as the library keeps them (ObjectValue's Map); anything else has none. */
const attributesOf = (item: RuntimeValue) => (item.type === 'ObjectValue' && item.value instanceof Map ? (item.value as ReadonlyMap<string, RuntimeValue>) : undefined);

export class TemplateInterpreter extends LibraryInterpreter {
  override applyFilter(operand: RuntimeValue, filterNode: FilterNode, environment: Environment): RuntimeValue {
    if (operand.type === 'UndefinedValue' && UNDEFINED_AS_EMPTY.has(filterName(filterNode) ?? '')) {
      return super.applyFilter(this.evaluate({ type: 'StringLiteral', value: '' }, environment), filterNode, environment);
    }
    const name = selectingFilter(filterNode);
    const items = operand.value as RuntimeValue[];
    const { keep, byAttribute } = (name !== null && SELECTING_FILTERS.get(name)) || { keep: true, byAttribute: false };
    // What the library does itself, or refuses in its own words (an attribute filter over non-objects).
    if (name === null || operand.type !== 'ArrayValue' || (byAttribute && !items.every(attributesOf))) return super.applyFilter(operand, filterNode, environment);
    const args = (filterNode.args ?? []).map((arg) => this.evaluate(arg, environment));
    const attribute = byAttribute ? String(args.shift()?.value) : undefined;
    const [testName, ...testArgs] = args;
    let test: Test = (value) => value.__bool__().value;
    if (testName !== undefined) {
      const named = (environment.tests as ReadonlyMap<string, Test>).get(String(testName.value));
      if (!named) throw new Error(`Unknown test: ${String(testName.value)}`);
      test = (value) => named(value, ...testArgs);
    }
    // Jinja's undefined, for an item without the attribute (a name no template defines).
    const missing = () => environment.lookupVariable('\u0000no such attribute') as unknown as RuntimeValue;
    const subject = (item: RuntimeValue) => (attribute === undefined ? item : (attributesOf(item)!.get(attribute) ?? missing()));
    const kept = items.filter((item) => test(subject(item)) === keep);
    // A new value of the operand's own class (the library's ArrayValue, not exported).
    return new (operand.constructor as new (value: RuntimeValue[]) => RuntimeValue)(kept);
  }
}

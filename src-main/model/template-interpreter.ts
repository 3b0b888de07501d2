/**
 * The Jinja interpreter chat templates run in: @huggingface/jinja's, plus the `select` and
 * `reject` filters it lacks (it has `selectattr` and `rejectattr` only). Llama 3.1's template
 * needs `reject` for its builtin tools: `builtin_tools | reject('equalto', 'code_interpreter')`.
 *
 * As in Jinja, `select(test, *args)` keeps the items for which the named test passes (with
 * the items as its first argument and `args` after it), `reject` keeps the others, and with
 * no test name each item's own truth decides. Tests are the library's (`equalto`, `eq`,
 * `string`, `none`, …). Everything else is the library's own filter code.
 *
 * The library declares its filter hook private; the subclass below reaches it through an
 * untyped view of the class, and calls the library for every other filter.
 */
import { Environment, Interpreter } from '@huggingface/jinja';

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

const SELECTING_FILTERS = new Set(['select', 'reject']);

/** The filter's name when it is `select` or `reject` (bare or called), else null. */
function selectingFilter(node: FilterNode): string | null {
  const name = node.type === 'Identifier' ? node.value : node.type === 'CallExpression' && node.callee?.type === 'Identifier' ? node.callee.value : undefined;
  return name !== undefined && SELECTING_FILTERS.has(name) ? name : null;
}

export class TemplateInterpreter extends LibraryInterpreter {
  override applyFilter(operand: RuntimeValue, filterNode: FilterNode, environment: Environment): RuntimeValue {
    const name = selectingFilter(filterNode);
    if (name === null || operand.type !== 'ArrayValue') return super.applyFilter(operand, filterNode, environment);
    const [testName, ...testArgs] = (filterNode.args ?? []).map((arg) => this.evaluate(arg, environment));
    let test: Test = (item) => item.__bool__().value;
    if (testName !== undefined) {
      const named = (environment.tests as ReadonlyMap<string, Test>).get(String(testName.value));
      if (!named) throw new Error(`Unknown test: ${String(testName.value)}`);
      test = (item) => named(item, ...testArgs);
    }
    const keep = name === 'select';
    const items = (operand.value as RuntimeValue[]).filter((item) => test(item) === keep);
    // A new value of the operand's own class (the library's ArrayValue, not exported).
    return new (operand.constructor as new (value: RuntimeValue[]) => RuntimeValue)(items);
  }
}

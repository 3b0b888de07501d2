/**
 * The `calculator` tool's arithmetic (docs/design.md §Rollouts): a small recursive-descent
 * parser and evaluator, written here because no expression library is installed and a
 * model's text must never reach eval/Function. It knows numbers, + − × ÷ ^ % (modulo),
 * parentheses, unary minus, the constants pi and e, and a fixed list of functions; any other
 * name is an error, so nothing but arithmetic can run.
 *
 *     expression := term (('+' | '-') term)*
 *     term       := unary (('*' | '/' | '%') unary)*
 *     unary      := ('-' | '+') unary | power
 *     power      := primary ('^' unary)?          right-associative: 2^3^2 = 2^9; -2^2 = -4
 *     primary    := number | name | name '(' expression (',' expression)* ')' | '(' expression ')'
 */

export class CalculatorError extends Error {
  override name = 'CalculatorError';
}

/** Longer input is refused before parsing: a tool call is a line, not a program. */
export const MAX_EXPRESSION_LENGTH = 500;
/** Nesting deeper than this is refused (the parser recurses once per level). */
const MAX_DEPTH = 64;

const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E };

/** Each function with its accepted argument counts. */
const FUNCTIONS: Record<string, { arity: [number, number]; apply: (args: number[]) => number }> = {
  sqrt: { arity: [1, 1], apply: ([x]) => {
    if (x! < 0) throw new CalculatorError('sqrt of a negative number');
    return Math.sqrt(x!);
  } },
  abs: { arity: [1, 1], apply: ([x]) => Math.abs(x!) },
  round: { arity: [1, 2], apply: ([x, digits = 0]) => roundTo(x!, digits) },
  floor: { arity: [1, 1], apply: ([x]) => Math.floor(x!) },
  ceil: { arity: [1, 1], apply: ([x]) => Math.ceil(x!) },
  min: { arity: [1, Infinity], apply: (xs) => Math.min(...xs) },
  max: { arity: [1, Infinity], apply: (xs) => Math.max(...xs) },
  ln: { arity: [1, 1], apply: ([x]) => positive(x!, 'ln', Math.log) },
  log10: { arity: [1, 1], apply: ([x]) => positive(x!, 'log10', Math.log10) },
  exp: { arity: [1, 1], apply: ([x]) => Math.exp(x!) },
};

function positive(x: number, name: string, f: (x: number) => number): number {
  if (x <= 0) throw new CalculatorError(`${name} of a number ≤ 0`);
  return f(x);
}

function roundTo(x: number, digits: number): number {
  if (!Number.isInteger(digits) || digits < 0 || digits > 15) throw new CalculatorError('round: digits must be a whole number from 0 to 15');
  const scale = 10 ** digits;
  return Math.round(x * scale) / scale;
}

type Token = { kind: 'number'; value: number; at: number } | { kind: 'name'; value: string; at: number } | { kind: 'op'; value: string; at: number };

/** Spellings models write for the four operators, folded to one each. */
const OPERATOR_ALIASES: Record<string, string> = { '×': '*', '·': '*', '÷': '/', '−': '-', '–': '-', '**': '^' };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s+|(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[A-Za-z_][A-Za-z0-9_]*|\*\*|[-+*/%^(),×·÷−–]/y;
  let at = 0;
  while (at < text.length) {
    pattern.lastIndex = at;
    const m = pattern.exec(text);
    if (!m) throw new CalculatorError(`unexpected character '${text[at]}' at position ${at + 1}`);
    const piece = m[0];
    if (/^\s/.test(piece)) {
      // whitespace separates tokens
    } else if (/^[\d.]/.test(piece)) tokens.push({ kind: 'number', value: Number(piece), at });
    else if (/^[A-Za-z_]/.test(piece)) tokens.push({ kind: 'name', value: piece.toLowerCase(), at });
    else tokens.push({ kind: 'op', value: OPERATOR_ALIASES[piece] ?? piece, at });
    at += piece.length;
  }
  return tokens;
}

class Parser {
  private i = 0;
  private depth = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): number {
    if (!this.tokens.length) throw new CalculatorError('the expression is empty');
    const value = this.expression();
    const rest = this.tokens[this.i];
    if (rest) throw new CalculatorError(`unexpected '${rest.value}' at position ${rest.at + 1}`);
    return value;
  }

  private peekOp(...ops: string[]): string | undefined {
    const t = this.tokens[this.i];
    return t?.kind === 'op' && ops.includes(t.value) ? t.value : undefined;
  }

  private expect(op: string): void {
    if (!this.peekOp(op)) {
      const t = this.tokens[this.i];
      throw new CalculatorError(t ? `expected '${op}' at position ${t.at + 1}, found '${t.value}'` : `expected '${op}' at the end`);
    }
    this.i++;
  }

  private nested<T>(f: () => T): T {
    if (++this.depth > MAX_DEPTH) throw new CalculatorError(`nested more than ${MAX_DEPTH} levels deep`);
    try {
      return f();
    } finally {
      this.depth--;
    }
  }

  private expression(): number {
    let value = this.term();
    for (let op = this.peekOp('+', '-'); op; op = this.peekOp('+', '-')) {
      this.i++;
      const right = this.term();
      value = op === '+' ? value + right : value - right;
    }
    return value;
  }

  private term(): number {
    let value = this.unary();
    for (let op = this.peekOp('*', '/', '%'); op; op = this.peekOp('*', '/', '%')) {
      this.i++;
      const right = this.unary();
      if ((op === '/' || op === '%') && right === 0) throw new CalculatorError(op === '/' ? 'division by zero' : 'modulo by zero');
      value = op === '*' ? value * right : op === '/' ? value / right : value % right;
    }
    return value;
  }

  private unary(): number {
    const op = this.peekOp('-', '+');
    if (op) {
      this.i++;
      const value = this.nested(() => this.unary());
      return op === '-' ? -value : value;
    }
    return this.power();
  }

  private power(): number {
    const base = this.primary();
    if (!this.peekOp('^')) return base;
    this.i++;
    const exponent = this.nested(() => this.unary());
    return base ** exponent;
  }

  private primary(): number {
    const t = this.tokens[this.i];
    if (!t) throw new CalculatorError('the expression ends too early');
    if (t.kind === 'number') {
      this.i++;
      return t.value;
    }
    if (t.kind === 'name') {
      this.i++;
      return this.peekOp('(') ? this.call(t.value, t.at) : this.constant(t.value, t.at);
    }
    if (t.value === '(') {
      this.i++;
      const value = this.nested(() => this.expression());
      this.expect(')');
      return value;
    }
    throw new CalculatorError(`unexpected '${t.value}' at position ${t.at + 1}`);
  }

  private constant(name: string, at: number): number {
    if (Object.hasOwn(CONSTANTS, name)) return CONSTANTS[name]!;
    throw new CalculatorError(`unknown name '${name}' at position ${at + 1} (known: ${Object.keys(CONSTANTS).join(', ')} and the functions ${Object.keys(FUNCTIONS).join(', ')})`);
  }

  private call(name: string, at: number): number {
    if (!Object.hasOwn(FUNCTIONS, name)) throw new CalculatorError(`unknown function '${name}' at position ${at + 1} (known: ${Object.keys(FUNCTIONS).join(', ')})`);
    const fn = FUNCTIONS[name]!;
    this.expect('(');
    const args = this.nested(() => {
      const list = [this.expression()];
      while (this.peekOp(',')) {
        this.i++;
        list.push(this.expression());
      }
      return list;
    });
    this.expect(')');
    const [least, most] = fn.arity;
    if (args.length < least || args.length > most) {
      const wanted = least === most ? `${least}` : most === Infinity ? `at least ${least}` : `${least} or ${most}`;
      throw new CalculatorError(`${name} takes ${wanted} argument${wanted === '1' ? '' : 's'}, got ${args.length}`);
    }
    return fn.apply(args);
  }
}

/** The value of an arithmetic expression; throws a CalculatorError saying what is wrong. */
export function evaluateExpression(text: string): number {
  if (typeof text !== 'string') throw new CalculatorError('the expression must be a string');
  if (text.length > MAX_EXPRESSION_LENGTH) throw new CalculatorError(`the expression is longer than ${MAX_EXPRESSION_LENGTH} characters`);
  const value = new Parser(tokenize(text)).parse();
  if (!Number.isFinite(value)) throw new CalculatorError('the result is not a finite number');
  return value;
}

/** A result as a model should read it: at most 12 significant digits, no float noise (0.1 + 0.2 → 0.3). */
export function formatNumber(value: number): string {
  const rounded = Number(value.toPrecision(12));
  return Object.is(rounded, -0) ? '0' : String(rounded);
}

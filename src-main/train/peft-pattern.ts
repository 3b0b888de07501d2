/**
 * PEFT's `rank_pattern` / `alpha_pattern` lookup (peft.utils.other.get_pattern_key): a key
 * applies to a module whose path equals it, or that `re.match(r"(.*\.)?(key)$")` matches. The
 * keys come from an adapter folder, that is from anyone, so they are not handed to a
 * backtracking regular-expression engine (a key like `(.*)*(.*)*x` would take minutes): they
 * are compiled here into a Thompson automaton and run in time linear in the module path.
 *
 * The syntax covered is what module patterns use: literals, `.`, escapes (`\.`, `\d`, `\w`,
 * `\s` and their negations), classes `[a-z0-9_]` / `[^…]`, groups `(…)` / `(?:…)`, `|`,
 * `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` (lazy forms too), and `^` / `$` at the ends. Anything
 * else (look-arounds, back-references) is refused with one line naming the key.
 */
import { UserError } from '../../src-shared/types.js';

const MAX_KEY = 1_000;
const MAX_STATES = 20_000;
const MAX_REPEAT = 100;

type Test = (c: string) => boolean;
type Node =
  | { t: 'char'; test: Test }
  | { t: 'seq'; items: Node[] }
  | { t: 'alt'; options: Node[] }
  | { t: 'rep'; node: Node; min: number; max: number | null };

const DIGIT: Test = (c) => c >= '0' && c <= '9';
const WORD: Test = (c) => DIGIT(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
const SPACE: Test = (c) => /^\s$/.test(c);
const CLASS_ESCAPES: Record<string, Test> = { d: DIGIT, w: WORD, s: SPACE, D: (c) => !DIGIT(c), W: (c) => !WORD(c), S: (c) => !SPACE(c) };

class Parser {
  private i = 0;
  constructor(private readonly src: string, private readonly fail: (why: string) => never) {}

  parse(): Node {
    if (this.src.startsWith('^')) this.i = 1;
    const node = this.alt();
    if (this.i < this.src.length) this.fail(`unexpected '${this.src[this.i]}' at ${this.i}`);
    return node;
  }

  private alt(): Node {
    const options = [this.seq()];
    while (this.src[this.i] === '|') {
      this.i++;
      options.push(this.seq());
    }
    return options.length === 1 ? options[0]! : { t: 'alt', options };
  }

  private seq(): Node {
    const items: Node[] = [];
    while (this.i < this.src.length && this.src[this.i] !== '|' && this.src[this.i] !== ')') {
      if (this.src[this.i] === '$' && this.i === this.src.length - 1) {
        this.i++;
        break;
      }
      items.push(this.quantified(this.atom()));
    }
    return { t: 'seq', items };
  }

  private quantified(node: Node): Node {
    for (;;) {
      const c = this.src[this.i];
      let min: number, max: number | null;
      if (c === '*') [min, max] = [0, null];
      else if (c === '+') [min, max] = [1, null];
      else if (c === '?') [min, max] = [0, 1];
      else if (c === '{' && /^\{\d+(,\d*)?\}/.test(this.src.slice(this.i))) {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i))!;
        min = Number(m[1]);
        max = m[2] === undefined ? min : m[3] ? Number(m[3]) : null;
        if (min > MAX_REPEAT || (max !== null && (max > MAX_REPEAT || max < min))) this.fail(`repeat ${m[0]} is out of bounds (at most ${MAX_REPEAT})`);
        this.i += m[0].length - 1;
      } else return node;
      this.i++;
      if (this.src[this.i] === '?') this.i++; // lazy: the same strings match
      node = { t: 'rep', node, min, max };
    }
  }

  private atom(): Node {
    const c = this.src[this.i++]!;
    if (c === '(') {
      if (this.src[this.i] === '?') {
        if (this.src[this.i + 1] !== ':') this.fail(`'(?${this.src[this.i + 1] ?? ''}' (look-arounds and named groups) is not supported`);
        this.i += 2;
      }
      const inner = this.alt();
      if (this.src[this.i++] !== ')') this.fail('a group is not closed');
      return inner;
    }
    if (c === '[') return { t: 'char', test: this.charClass() };
    if (c === '.') return { t: 'char', test: (x) => x !== '\n' };
    if (c === '\\') return { t: 'char', test: this.escape() };
    if ('*+?{'.includes(c)) this.fail(`'${c}' at ${this.i - 1} repeats nothing`);
    if (c === ')' || c === '^' || c === '$') this.fail(`'${c}' at ${this.i - 1} is not supported there`);
    return { t: 'char', test: (x) => x === c };
  }

  private escape(): Test {
    const e = this.src[this.i++];
    if (e === undefined) this.fail('it ends with a backslash');
    if (CLASS_ESCAPES[e!]) return CLASS_ESCAPES[e!]!;
    if (/[0-9A-Za-z]/.test(e!)) this.fail(`'\\${e}' is not supported`);
    return (x) => x === e;
  }

  private charClass(): Test {
    const negate = this.src[this.i] === '^';
    if (negate) this.i++;
    const tests: Test[] = [];
    let first = true;
    while (this.i < this.src.length && (this.src[this.i] !== ']' || first)) {
      first = false;
      let lo: string;
      if (this.src[this.i] === '\\') {
        this.i++;
        const e = this.src[this.i++];
        if (e !== undefined && CLASS_ESCAPES[e]) {
          tests.push(CLASS_ESCAPES[e]!);
          continue;
        }
        if (e === undefined || /[0-9A-Za-z]/.test(e)) this.fail(`'\\${e ?? ''}' is not supported in a class`);
        lo = e!;
      } else lo = this.src[this.i++]!;
      if (this.src[this.i] === '-' && this.src[this.i + 1] !== undefined && this.src[this.i + 1] !== ']') {
        const hi = this.src[this.i + 1]!;
        this.i += 2;
        tests.push((x) => x >= lo && x <= hi);
      } else tests.push((x) => x === lo);
    }
    if (this.src[this.i++] !== ']') this.fail('a class [ is not closed');
    return negate ? (x) => !tests.some((t) => t(x)) : (x) => tests.some((t) => t(x));
  }
}

interface State {
  test?: Test;
  /** Where a character that passes `test` leads. */
  on?: number;
  /** Empty moves. */
  eps: number[];
}

/** A compiled key: whether it matches a whole string. */
class Automaton {
  private readonly states: State[] = [];
  private readonly start: number;
  private readonly end: number;

  constructor(node: Node, private readonly fail: (why: string) => never) {
    [this.start, this.end] = this.build(node);
  }

  private state(s: State = { eps: [] }): number {
    if (this.states.length >= MAX_STATES) this.fail(`it is too large to match (over ${MAX_STATES} states)`);
    this.states.push(s);
    return this.states.length - 1;
  }

  private build(node: Node): [number, number] {
    if (node.t === 'char') {
      const end = this.state();
      return [this.state({ test: node.test, on: end, eps: [] }), end];
    }
    if (node.t === 'seq') {
      const start = this.state();
      let at = start;
      for (const item of node.items) {
        const [s, e] = this.build(item);
        this.states[at]!.eps.push(s);
        at = e;
      }
      return [start, at];
    }
    if (node.t === 'alt') {
      const start = this.state();
      const end = this.state();
      for (const option of node.options) {
        const [s, e] = this.build(option);
        this.states[start]!.eps.push(s);
        this.states[e]!.eps.push(end);
      }
      return [start, end];
    }
    const start = this.state();
    let at = start;
    for (let k = 0; k < node.min; k++) {
      const [s, e] = this.build(node.node);
      this.states[at]!.eps.push(s);
      at = e;
    }
    const end = this.state();
    if (node.max === null) {
      const [s, e] = this.build(node.node);
      this.states[at]!.eps.push(s, end);
      this.states[e]!.eps.push(s, end);
    } else {
      for (let k = node.min; k < node.max; k++) {
        const [s, e] = this.build(node.node);
        this.states[at]!.eps.push(s, end);
        at = e;
      }
      this.states[at]!.eps.push(end);
    }
    return [start, end];
  }

  private closure(from: Iterable<number>): Set<number> {
    const seen = new Set<number>();
    const stack = [...from];
    while (stack.length) {
      const s = stack.pop()!;
      if (seen.has(s)) continue;
      seen.add(s);
      stack.push(...this.states[s]!.eps);
    }
    return seen;
  }

  matches(text: string): boolean {
    let current = this.closure([this.start]);
    for (const c of text) {
      const next: number[] = [];
      for (const s of current) {
        const st = this.states[s]!;
        if (st.test && st.test(c)) next.push(st.on!);
      }
      if (!next.length) return false;
      current = this.closure(next);
    }
    return current.has(this.end);
  }
}

/** A pattern table's lookup: the value of the first key (in file order) that applies to a module path. */
export function patternLookup(patterns: Record<string, number>, field: string, file: string): (modulePath: string) => number | undefined {
  const compiled = Object.entries(patterns).map(([key, value]) => {
    const fail = (why: string): never => {
      throw new UserError(`${file}: ${field} key '${key.slice(0, 80)}' is not a module pattern Hindsight can match: ${why}`);
    };
    if (key.length > MAX_KEY) fail(`longer than ${MAX_KEY} characters`);
    return { key, value, automaton: new Automaton(new Parser(key, fail).parse(), fail) };
  });
  return (modulePath) => {
    for (const { key, value, automaton } of compiled) {
      if (key === modulePath) return value;
      // `(.*\.)?(key)$` from the start: the key matches the whole path or a part after a dot.
      for (let i = 0; i <= modulePath.length; i = modulePath.indexOf('.', i) + 1 || modulePath.length + 1) {
        if (automaton.matches(modulePath.slice(i))) return value;
      }
    }
    return undefined;
  };
}

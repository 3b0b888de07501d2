// The calculator tool's parser (src-main/rollout/calculator.ts): precedence and associativity,
// the functions, one-line errors, and that no name outside arithmetic ever runs.
import { describe, expect, it } from 'vitest';
import { CalculatorError, evaluateExpression, formatNumber, MAX_EXPRESSION_LENGTH } from '../../src-main/rollout/calculator.js';
import { calculatorTool } from '../../src-main/rollout/builtin-tools.js';

const calc = (text: string) => evaluateExpression(text);

describe('calculator: values', () => {
  it.each([
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['10 - 4 - 3', 3],
    ['100 / 10 / 5', 2],
    ['2 ^ 3 ^ 2', 512],
    ['-2 ^ 2', -4],
    ['(-2) ^ 2', 4],
    ['2 ^ -1', 0.5],
    ['--3', 3],
    ['-(1 + 2) * 2', -6],
    ['17 % 5', 2],
    ['2 + 17 % 5 * 2', 6],
    ['17 × 23', 391],
    ['391 ÷ 17', 23],
    ['10 − 3', 7],
    ['2 ** 10', 1024],
    ['.5 + 1.25e2', 125.5],
    ['sqrt(16) + abs(-3)', 7],
    ['round(3.14159, 2)', 3.14],
    ['round(2.5)', 3],
    ['min(4, 2, 8) + max(1, 9)', 11],
    ['floor(-1.5) + ceil(1.2)', 0],
    ['ln(e) + log10(1000) + exp(0)', 5],
    ['2 * PI', 2 * Math.PI],
    ['SQRT(9)', 3],
  ])('%s = %d', (text, want) => {
    expect(calc(text)).toBeCloseTo(want, 12);
  });

  it('formats results without float noise', () => {
    expect(formatNumber(calc('0.1 + 0.2'))).toBe('0.3');
    expect(formatNumber(calc('1 / 3'))).toBe('0.333333333333');
    expect(formatNumber(calc('-0 * 5'))).toBe('0');
    expect(formatNumber(calc('2 ^ 60'))).toBe('1152921504610000000');
    expect(formatNumber(calc('10 ^ 25 / 3'))).toBe('3.33333333333e+24');
  });
});

describe('calculator: errors', () => {
  it.each([
    ['', /empty/],
    ['1 +', /ends too early/],
    ['(1 + 2', /expected '\)' at the end/],
    ['1 + 2)', /unexpected '\)' at position 6/],
    ['1 / 0', /division by zero/],
    ['5 % 0', /modulo by zero/],
    ['sqrt(-1)', /negative/],
    ['ln(0)', /ln of a number ≤ 0/],
    ['round(1.5, 2.5)', /digits/],
    ['max()', /unexpected '\)'/],
    ['sqrt(1, 2)', /sqrt takes 1 argument, got 2/],
    ['10 ^ 400', /not a finite number/],
    ['2 3', /unexpected '3'/],
    ['1 $ 2', /unexpected character '\$' at position 3/],
  ])('%j → %s', (text, message) => {
    expect(() => calc(text)).toThrow(CalculatorError);
    expect(() => calc(text)).toThrow(message);
  });

  it('refuses every name that is not a constant or a known function, so nothing but arithmetic runs', () => {
    const attempts = [
      'process.exit(1)', 'require("fs")', 'constructor', '__proto__', 'x + 1', 'Math.sqrt(4)', 'eval("1")',
      'Function("return 1")()', 'this', 'globalThis', 'toString(1)', 'hasOwnProperty(1)', '1; 2', '`1`', '[1]', 'a=1',
    ];
    for (const text of attempts) expect(() => calc(text), text).toThrow(CalculatorError);
    expect(() => calc('constructor(1)')).toThrow(/unknown function 'constructor'/);
    expect(() => calc('foo')).toThrow(/unknown name 'foo'/);
  });

  it('bounds the input length and the nesting depth', () => {
    expect(() => calc('1+'.repeat(MAX_EXPRESSION_LENGTH) + '1')).toThrow(/longer than/);
    expect(() => calc('('.repeat(100) + '1' + ')'.repeat(100))).toThrow(/nested more than/);
    expect(() => calc('-'.repeat(100) + '1')).toThrow(/nested more than/);
    expect(calc('('.repeat(30) + '1' + ')'.repeat(30))).toBe(1);
  });

  it('as a tool: takes {"expression"} and answers text', async () => {
    expect(await calculatorTool.run({ expression: '6 * 7' }, { signal: new AbortController().signal })).toBe('42');
    expect(() => calculatorTool.run({}, { signal: new AbortController().signal })).toThrow(/missing argument "expression"/);
    expect(() => calculatorTool.run({ expression: 42 }, { signal: new AbortController().signal })).toThrow(/must be a string/);
  });
});

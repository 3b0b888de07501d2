// One set of bounds per numeric training option (src-shared/training.ts TRAIN_BOUNDS): the
// table itself at and past each bound, the CLI's flag parsing, the API contract's validator
// and the trainer all refuse the same values in the same words; and `hindsight train` refuses
// a value out of bounds in one line, exit 1, before anything is written, so that the next
// run with a valid value starts in the same --out folder.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.js';
import { conv, fakeExport, tempDir, tempWorkspace, trainOnEverySession } from '../store/helpers.js';
import { boundFlag, UsageError } from '../../src-main/cli/args.js';
import { train } from '../../src-main/train/trainer.js';
import { checkBounds } from '../../src-main/train/run-settings.js';
import { ValidationError, validateCall } from '../../src-shared/contract.js';
import { defaultOnPolicySettings } from '../../src-shared/on-policy-api.js';
import { ON_POLICY_DEFAULTS, PPO_DEFAULTS } from '../../src-shared/rollout.js';
import {
  APP_TRAIN_DEFAULTS, BOUNDED_OPTIONS, boundProblem, checkBound, defaultEpsHigh, inputBounds, TRAIN_BOUNDS, TRAIN_DEFAULTS, type BoundedOption, type OptionBound,
} from '../../src-shared/training.js';
import { UserError } from '../../src-shared/types.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MODEL = path.join(ROOT, 'resources/models/stories260K');

/** A step just past a bound: 1 for a whole number, else a small fraction of the bound's size. */
const nudge = (b: OptionBound, at: number) => (b.integer ? 1 : Math.max(1e-6, Math.abs(at) * 1e-6));

/** For each option: the values at and past its bounds, each with whether the option accepts it. */
function boundaryCases(option: BoundedOption): [number, boolean][] {
  const b: OptionBound = TRAIN_BOUNDS[option];
  const cases: [number, boolean][] = [
    [b.min, !b.minExclusive],
    [b.min - nudge(b, b.min), false],
    [b.min + nudge(b, b.min), true],
    [Number.NaN, false],
    [Number.POSITIVE_INFINITY, false],
  ];
  if (b.max !== undefined) cases.push([b.max, !b.maxExclusive], [b.max + nudge(b, b.max), false], [b.max - nudge(b, b.max), true]);
  if (b.integer) cases.push([b.min + 1.5, false]);
  return cases;
}

/** A TrainConfig the contract accepts; `onPolicy` too, so its fields can be set. */
const goodConfig = () => ({
  modelDir: '/m', outDir: '/o', method: 'combine', steps: 2, batchSize: 2, lr: 1e-3, optimizer: 'adamw', loraR: 4, loraAlpha: 8,
  targets: ['q', 'v'], device: 'cpu', seed: 0, checkpointEvery: 0, maxLength: 64, onPolicy: defaultOnPolicySettings(),
});

function withField(config: Record<string, unknown>, field: string, value: unknown): Record<string, unknown> {
  const [head, tail] = field.split('.') as [string, string | undefined];
  return tail === undefined ? { ...config, [head]: value } : { ...config, [head]: { ...(config[head] as object), [tail]: value } };
}

describe('TRAIN_BOUNDS', () => {
  it('checks every option at and past each bound, naming the flag and the bounds in one line', () => {
    for (const option of BOUNDED_OPTIONS) {
      const b: OptionBound = TRAIN_BOUNDS[option];
      for (const [value, ok] of boundaryCases(option)) {
        const line = checkBound(option, value);
        expect(line === null, `${option} ${value}: ${line}`).toBe(ok);
        if (line) {
          expect(line).toMatch(new RegExp(`^--${b.flag} must be ${b.integer ? 'an integer ' : ''}[≥>] ${b.min}${b.max === undefined ? '' : ` and [≤<] ${b.max}`}, got ${value}$`));
          expect(line).not.toContain('\n');
        }
      }
    }
    expect(checkBound('lr', 0)).toBe('--lr must be > 0 and ≤ 1, got 0');
    expect(checkBound('maxLength', 15)).toBe('--max-length must be an integer ≥ 16 and ≤ 1048576, got 15');
    expect(checkBound('epsLow', 1)).toBe('--eps-low must be ≥ 0 and < 1, got 1');
  });

  it('holds every default: the trainer\'s, the PPO, on-policy and app ones', () => {
    const defaults: Partial<Record<BoundedOption, number>> = {
      ...TRAIN_DEFAULTS, epsHigh: Math.min(defaultEpsHigh('rl'), defaultEpsHigh('opd')), ...PPO_DEFAULTS, ...ON_POLICY_DEFAULTS, steps: APP_TRAIN_DEFAULTS.steps,
    } as never;
    for (const option of BOUNDED_OPTIONS) {
      const value = (defaults as Record<string, unknown>)[option];
      if (typeof value === 'number') expect(boundProblem(option, value), `${option} default ${value}`).toBeNull();
    }
    expect(boundProblem('epsHigh', Math.max(defaultEpsHigh('rl'), defaultEpsHigh('opd')))).toBeNull();
  });

  it('gives the page inclusive bounds only (a number input cannot say "> 0")', () => {
    expect(inputBounds('lr')).toEqual({ max: 1, step: 'any' });
    expect(inputBounds('maxLength')).toEqual({ min: 16, max: 1_048_576, step: 1 });
    expect(inputBounds('saveEvery')).toEqual({ min: 0, step: 1 });
    expect(inputBounds('epsLow')).toEqual({ min: 0, step: 'any' });
  });
});

describe('the four places agree', () => {
  it('the CLI parses a flag at an inclusive bound, and refuses one past it with the table\'s line (exit 1), or text that is no number (exit 2)', () => {
    for (const option of BOUNDED_OPTIONS) {
      for (const [value, ok] of boundaryCases(option)) {
        if (!Number.isFinite(value)) continue;
        if (ok) expect(boundFlag(option, String(value))).toBe(value);
        else expect(() => boundFlag(option, String(value))).toThrow(new UserError(checkBound(option, value)!));
      }
    }
    expect(boundFlag('lr', undefined)).toBeUndefined();
    expect(() => boundFlag('lr', 'fast')).toThrow(UsageError);
    expect(() => boundFlag('lr', '')).toThrow(UsageError);
    expect(() => boundFlag('steps', 'Infinity')).toThrow(new UserError('--steps must be an integer ≥ 1 and ≤ 1000000, got Infinity'));
  });

  it('the API contract refuses the same values, naming the field, in the same words', () => {
    expect(() => validateCall('trainStart', goodConfig())).not.toThrow();
    const fields = BOUNDED_OPTIONS.filter((o) => TRAIN_BOUNDS[o].field !== null);
    expect(fields).toEqual(expect.arrayContaining(['steps', 'batchSize', 'lr', 'loraR', 'loraAlpha', 'seed', 'saveEvery', 'maxLength', 'rollouts', 'ppoEpochs']));
    for (const option of fields) {
      const field: string = TRAIN_BOUNDS[option].field!;
      for (const [value, ok] of boundaryCases(option)) {
        const config = withField(goodConfig(), field, value);
        if (ok) {
          expect(() => validateCall('trainStart', config), `${field} ${value}`).not.toThrow();
          continue;
        }
        let err: unknown;
        try {
          validateCall('trainStart', config);
        } catch (e) {
          err = e;
        }
        expect(err, `${field} ${value}`).toBeInstanceOf(ValidationError);
        expect((err as ValidationError).field).toBe(field);
        // Non-finite values are refused as such before the bounds are read.
        if (Number.isFinite(value)) expect((err as ValidationError).problem).toBe(boundProblem(option, value));
      }
    }
  });

  it('the trainer refuses the same values before it reads or writes anything', async () => {
    for (const option of BOUNDED_OPTIONS) {
      for (const [value, ok] of boundaryCases(option)) {
        if (ok) expect(() => checkBounds({ [option]: value })).not.toThrow();
        else expect(() => checkBounds({ [option]: value })).toThrow(new UserError(checkBound(option, value)!));
      }
    }
    const out = path.join(tempDir(), 'api-run');
    await expect(train({ modelDir: path.join(tempDir(), 'no-model'), outDir: out, dataFile: '/none.jsonl', lr: 0 })).rejects.toThrow(/^--lr must be > 0 and ≤ 1, got 0$/);
    expect(fs.existsSync(out)).toBe(false);
  });
});

describe('hindsight train with an option out of bounds', () => {
  it('exits 1 with one line naming the flag and creates no --out folder; the next run with a valid value starts there', async () => {
    const { ws, dbPath, dir } = await tempWorkspace();
    await ws.importExport(fakeExport('s.jsonl', [
      conv('a', [['user', 'Tell me a story.'], ['assistant', 'Once upon a time, there was a little girl named Lily.'], ['user', 'Perfect, thanks!']]),
      conv('b', [['user', 'Tell me a story.'], ['assistant', 'The dog ran to the park.'], ['user', 'No, write about a cat.']]),
    ]));
    trainOnEverySession(ws);
    ws.setLabel('openai:a', 1, { reward: 1 });
    ws.setLabel('openai:b', 1, { reward: -1 });
    ws.close();
    const out = path.join(dir, 'run');
    const base = ['train', '--model', MODEL, '--db', dbPath, '--out', out, '--steps', '1', '--lora-r', '2'];
    // Representative flags, at an exclusive bound and past inclusive ones (the table test above covers every option).
    const cases: [string, string][] = [
      ['--lr', '0'], ['--lr', '1.5'], ['--max-length', '15'], ['--steps', '0'], ['--lora-alpha', '0'], ['--eps-low', '1'],
      ['--seed', '4294967296'], ['--batch-size', '2.5'], ['--top-p', '0'],
    ];
    for (const [flag, value] of cases) {
      const args = flag === '--top-p' ? [...base, '--on-policy', '--method', 'opd', flag, value] : [...base.filter((a, i) => !(a === flag || base[i - 1] === flag)), flag, value];
      const r = await cli(...args);
      expect([r.code, r.stdout], `${flag} ${value}: ${r.stderr}`).toEqual([1, '']);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^hindsight train: ${flag} must be .*, got ${value.replace('.', '\\.')}$`));
      expect(fs.existsSync(out), `${flag} ${value} left ${out}`).toBe(false);
    }
    const r = await cli(...base, '--lr', '1e-3', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({ status: 'finished', steps: 1 });
    // A resume asking for a value out of bounds is refused the same way, and leaves the run as it was.
    const log = fs.readFileSync(path.join(out, 'trainer_log.jsonl'), 'utf8');
    const again = await cli('train', '--resume', out, '--steps', '2', '--lr', '0');
    expect([again.code, again.stderr]).toEqual([1, 'hindsight train: --lr must be > 0 and ≤ 1, got 0\n']);
    expect(fs.readFileSync(path.join(out, 'trainer_log.jsonl'), 'utf8')).toBe(log);
  });
});

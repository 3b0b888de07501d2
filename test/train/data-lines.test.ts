// `--data` lines for the advantage estimators (src-main/train/data-lines.ts, docs/design.md
// §Command line, §Advantage estimators): token rewards, response_mask and group are read,
// checked and written back as they came, so dataset.jsonl round-trips them; grpo and gae take
// any finite reward and keep every row; a cut context moves the reward positions with it.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fitRow, type TrainRow } from '../../src-main/train/batches.js';
import { parseDataLine, rowToLine, rowsFromJsonl } from '../../src-main/train/data-lines.js';
import { rewardsOnTokens } from '../../src-main/train/grpo-gae.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-data-lines-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const V = 100;
const write = (name: string, lines: unknown[]) => {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return file;
};

describe('estimator fields', () => {
  const full = {
    input_ids: [1, 2, 3, 4, 5, 6], response_start: 2, reward: 0.25, rewards: [{ at: 3, r: 0.5 }, { at: 5, r: -0.25 }],
    response_mask: [1, 1, 0, 1], group: 'ctx-7', old_logprobs: [-0.5, -1, -2, -0.25], kept: true, session_id: 's1',
  };

  it('a line with every field round-trips through rowToLine, as dataset.jsonl holds it', () => {
    const set = rowsFromJsonl(write('full.jsonl', [full]), 'rl', V, 512, 'gae');
    expect(set.rows).toHaveLength(1);
    const row = set.rows[0]!;
    expect(row).toMatchObject({ reward: 0.25, rewards: full.rewards, responseMask: full.response_mask, group: 'ctx-7', oldLogprobs: full.old_logprobs });
    const line = rowToLine(row);
    expect(line).toEqual(full);
    const again = rowsFromJsonl(write('again.jsonl', [line]), 'rl', V, 512, 'gae').rows[0]!;
    expect({ ...again, origin: '' }).toEqual({ ...row, origin: '' });
  });

  it('token rewards alone give the row their sum; gae puts a plain reward on the last trained token', () => {
    const only = parseDataLine({ input_ids: [1, 2, 3, 4], response_start: 1, rewards: [{ at: 1, r: 2 }, { at: 3, r: -0.5 }] }, 'x', 'rl', V, 'gae');
    expect(only.reward).toBe(1.5);
    expect([...rewardsOnTokens({ ...only, origin: 'x' })]).toEqual([2, 0, -0.5]);
    const plain = parseDataLine({ input_ids: [1, 2, 3, 4, 5], response_start: 1, reward: 3, response_mask: [1, 1, 1, 0] }, 'x', 'rl', V, 'gae');
    expect([...rewardsOnTokens({ ...plain, origin: 'x' })]).toEqual([0, 0, 3, 0]);
    expect(parseDataLine({ input_ids: [1, 2], response_start: 1, reward: 1, group: 4 }, 'x', 'rl', V, 'grpo').group).toBe('4');
  });

  it('grpo and gae keep every row and any finite reward; the reward estimator keeps its ±1 rules', () => {
    const f = write('mixed.jsonl', [
      { input_ids: [1, 2, 3], response_start: 1, reward: 0, group: 'a' },
      { input_ids: [1, 2, 3], response_start: 1, reward: 0.7, group: 'a' },
    ]);
    expect(rowsFromJsonl(f, 'rl', V, 512, 'grpo').rows.map((r) => r.reward)).toEqual([0, 0.7]);
    expect(rowsFromJsonl(f, 'rl', V, 512, 'gae').rows).toHaveLength(2);
    expect(() => rowsFromJsonl(f, 'rl', V, 512, 'reward')).toThrow(/mixed\.jsonl:2: reward must be 1, -1 or 0, got 0\.7/);
  });

  it('with the reward estimator, token rewards standing in for the reward must sum to 1, -1 or 0', () => {
    const line = (r: number[]) => ({ input_ids: [1, 2, 3, 4], response_start: 1, rewards: r.map((x, i) => ({ at: i + 1, r: x })) });
    for (const method of ['rl', 'combine'] as const) {
      expect(() => rowsFromJsonl(write('half.jsonl', [line([1]), line([0.25, 0.25])]), method, V, 512, 'reward'))
        .toThrow(/half\.jsonl:2: with the reward estimator, rewards must sum to 1, -1 or 0 \(the row's reward\), got 0\.5$/);
      expect(() => rowsFromJsonl(write('two.jsonl', [line([1, 1])]), method, V, 512, 'reward')).toThrow(/two\.jsonl:1: .*got 2$/);
    }
    // Summing to ±1 or 0 they are read, and written back as the reward a resume accepts.
    const set = rowsFromJsonl(write('ok.jsonl', [line([0.5, 0.5]), line([-1]), line([1, -1])]), 'combine', V, 512, 'reward');
    expect(set.rows.map((r) => r.reward)).toEqual([1, -1]);
    expect(set.skipped).toEqual({ 'no signal': 1 });
    expect(parseDataLine(rowToLine(set.rows[0]!), 'dataset.jsonl:1', 'combine', V, 'reward').reward).toBe(1);
    // grpo and gae take any finite sum.
    expect(rowsFromJsonl(write('any.jsonl', [line([0.25, 0.25])]), 'rl', V, 512, 'gae').rows[0]!.reward).toBe(0.5);
  });

  const bad: [string, Record<string, unknown>, RegExp][] = [
    ['reward not finite', { reward: 'x' }, /reward must be a finite number, got "x"/],
    ['rl line with neither', {}, /rl needs "reward" or "rewards" on every line/],
    ['rewards not an array', { rewards: 3 }, /rewards must be an array of \{"at": position, "r": reward\}/],
    ['reward before the response', { rewards: [{ at: 1, r: 1 }] }, /rewards: at must be a response position in \[2, 4\], got 1/],
    ['reward past the end', { rewards: [{ at: 5, r: 1 }] }, /rewards: at must be a response position in \[2, 4\], got 5/],
    ['reward not a number', { rewards: [{ at: 3, r: null }] }, /rewards: r must be a finite number, got null/],
    ['reward twice', { rewards: [{ at: 3, r: 1 }, { at: 3, r: 2 }] }, /rewards: position 3 appears twice/],
    ['reward on a masked token', { rewards: [{ at: 3, r: 1 }], response_mask: [1, 0, 1] }, /rewards: position 3 is masked out by response_mask/],
    ['mask length', { reward: 1, response_mask: [1, 1] }, /response_mask must be 3 values of 0 or 1 \(one per response token\)/],
    ['mask values', { reward: 1, response_mask: [1, 2, 1] }, /response_mask must be 3 values of 0 or 1/],
    ['mask all zero', { reward: 1, response_mask: [0, 0, 0] }, /response_mask leaves no response token to train/],
    ['group type', { reward: 1, group: [1] }, /group must be a string or a number, got \[1\]/],
  ];
  for (const [name, extra, error] of bad) {
    it(`names the line: ${name}`, () => {
      const f = write('bad.jsonl', [{ input_ids: [1, 2, 3], response_start: 1, reward: 1 }, { input_ids: [1, 2, 3, 4, 5], response_start: 2, ...extra }]);
      expect(() => rowsFromJsonl(f, 'rl', V, 512, 'gae')).toThrow(new RegExp('bad\\.jsonl:2: ' + error.source));
    });
  }
});

describe('truncation', () => {
  it('a context cut from the left moves the token rewards with the response', () => {
    const row: TrainRow = { inputIds: [1, 10, 11, 12, 20, 21, 22], responseStart: 4, reward: 1, rewards: [{ at: 4, r: 1 }, { at: 6, r: 2 }], responseMask: [1, 0, 1], origin: 'x' };
    expect(fitRow(row, 5)).toBe('cut');
    expect(row).toMatchObject({ inputIds: [1, 12, 20, 21, 22], responseStart: 2, rewards: [{ at: 2, r: 1 }, { at: 4, r: 2 }], responseMask: [1, 0, 1] });
    expect([...rewardsOnTokens(row)]).toEqual([1, 0, 2]);
  });
});

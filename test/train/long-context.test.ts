// Long rows: the 2,048-token default, a run at 8,192 tokens on a tiny model, and samples over
// the window skipped and reported (the run's events, its log's note line, --json).
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { readLog, readLogNotes } from '../../src-main/train/trainer-log.js';
import { train, type TrainerEvent } from '../../src-main/train/trainer.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import { runCli as cli } from '../helpers/cli.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { tempDir } from '../store/helpers.js';

const root = tempDir('hindsight-long-');
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

// One head of width 8 keeps the 8,192² attention of the step at a quarter GB a tensor.
const model = writeTinyModel(path.join(root, 'model'), { family: 'qwen3', numLayers: 1, hiddenSize: 16, numHeads: 1, numKvHeads: 1, headDim: 8, intermediateSize: 16, maxPositions: 8192 });
const vocab = model.config.vocab_size as number;

function dataFile(name: string, rows: { length: number; reply: number }[]): string {
  const file = path.join(root, name);
  fs.writeFileSync(file, rows.map(({ length, reply }, i) => JSON.stringify({
    input_ids: Array.from({ length }, (_, t) => (t * 7 + i) % (vocab - 10)), response_start: length - reply, reward: i % 2 ? -1 : 1,
  })).join('\n') + '\n');
  return file;
}

describe('long rows', () => {
  it('--max-length defaults to 2,048 tokens (capped by the model\'s own positions)', () => {
    expect(TRAIN_DEFAULTS.maxLength).toBe(2048);
  });

  it('trains one step on an 8,192-token row', async () => {
    const out = path.join(root, 'run-8k');
    const result = await train({ modelDir: model.dir, outDir: out, dataFile: dataFile('long.jsonl', [{ length: 8192, reply: 256 }]), maxLength: 8192, steps: 1, batchSize: 1, loraR: 2 });
    expect(result).toMatchObject({ status: 'finished', steps: 1, rows: 1, truncated: 0, skipped: {} });
    expect(result.last!.tokens).toBe(256);
    expect(Number.isFinite(result.last!.loss)).toBe(true);
  }, 300_000);

  it('rows whose reply does not fit are skipped and reported: events, the log\'s note line, --json', async () => {
    const data = dataFile('mixed.jsonl', [{ length: 40, reply: 8 }, { length: 90, reply: 70 }, { length: 100, reply: 64 }, { length: 30, reply: 4 }]);
    const events: TrainerEvent[] = [];
    const out = path.join(root, 'run-mixed');
    const result = await train({ modelDir: model.dir, outDir: out, dataFile: data, maxLength: 64, steps: 1, batchSize: 4, loraR: 2 }, { onEvent: (e) => events.push(e) });
    expect(result).toMatchObject({ rows: 2, skipped: { 'over 64 tokens': 2 } });
    expect(events).toContainEqual({ type: 'overLength', count: 2, maxLength: 64, positions: 8192 });
    expect(readLogNotes(result.logFile)).toEqual([{ note: '2 samples over 64 tokens skipped; raise --max-length (this model holds up to 8,192)', skipped_over_length: 2, max_length: 64 }]);
    expect(readLog(result.logFile).map((l) => l.step)).toEqual([1]);

    const r = await cli('train', '--model', model.dir, '--out', path.join(root, 'run-cli'), '--data', data, '--max-length', '64', '--steps', '1', '--lora-r', '2', '--json');
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('2 samples over 64 tokens skipped; raise --max-length (this model holds up to 8,192)\n');
    expect(r.json().skipped).toEqual({ 'over 64 tokens': 2 });
  }, 120_000);
});

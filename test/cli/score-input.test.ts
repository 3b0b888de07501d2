// `score` reads the lines `export --format samples` writes, as they are: {"context":[…],
// "response":"…"} plus the export's other fields, which it ignores. Scored on the demo model,
// each line gives the same log-probs as the same context named "messages".
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readScoreInput } from '../../src-main/cli/score.js';
import { writeRealTinyModel } from '../../tools/real-tokenizers.js';
import { runCli as cli } from '../helpers/cli.js';
import { tempDir } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
const DEMO_EXPORT = path.resolve('resources/samples/demo-chatgpt.json');
/** A samples export with tool calls, tool results and replies with no text. */
const GOLDEN_SAMPLES = path.resolve('test/fixtures/export-golden/samples.jsonl');

function lines(file: string): any[] {
  return fs.readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
}

describe('score reads the samples export', () => {
  it('scores the lines of `export --format samples` as they are, like the same lines with "messages"', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'demo.db');
    expect((await cli('import', DEMO_EXPORT, '--db', db)).code).toBe(0);
    const exported = path.join(dir, 'samples.jsonl');
    expect((await cli('export', '--format', 'samples', '--out', exported, '--db', db)).code).toBe(0);
    const samples = lines(exported);
    expect(samples.length).toBeGreaterThan(0);
    expect(samples[0]).toHaveProperty('context');

    const scored = path.join(dir, 'scored.jsonl');
    const r = await cli('score', '--model', MODEL, '--input', exported, '--out', scored, '--json');
    expect(r.stderr).not.toContain('expected');
    expect(r.code).toBe(0);
    expect(r.json().rows).toBe(samples.length);
    const logprobs = lines(scored).map((l) => l.logprobs as number[]);
    expect(logprobs).toHaveLength(samples.length);
    for (const lp of logprobs) {
      expect(lp.length).toBeGreaterThan(0);
      expect(lp.every((x) => Number.isFinite(x) && x <= 0)).toBe(true);
    }

    const renamed = path.join(dir, 'messages.jsonl');
    fs.writeFileSync(renamed, samples.map((s) => JSON.stringify({ messages: s.context, response: s.response })).join('\n') + '\n');
    const again = path.join(dir, 'again.jsonl');
    expect((await cli('score', '--model', MODEL, '--input', renamed, '--out', again)).code).toBe(0);
    expect(lines(again).map((l) => l.logprobs)).toEqual(logprobs);
  });

  it('scores a samples export with tool calls and tool results, one output line per input line', async () => {
    const out = path.join(tempDir(), 'scored.jsonl');
    const r = await cli('score', '--model', MODEL, '--input', GOLDEN_SAMPLES, '--out', out, '--json');
    expect(r.code).toBe(0);
    expect(lines(out)).toHaveLength(lines(GOLDEN_SAMPLES).length);
    // The demo model's plain template writes no tool calls: those replies' text alone, said once.
    const calling = lines(GOLDEN_SAMPLES).filter((l) => l.response_tool_calls).length;
    expect(calling).toBeGreaterThan(0);
    expect(r.stderr).toContain(`${calling} of ${lines(GOLDEN_SAMPLES).length} replies call tools this model's chat template does not write: their text alone was scored`);
  });

  it('scores a reply\'s tool calls after a prompt with the line\'s tools, the span training renders', () => {
    const dir = tempDir();
    const model = writeRealTinyModel(path.join(dir, 'qwen3'), 'qwen3', { family: 'qwen3' });
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];
    const call = { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } };
    const context = [{ role: 'user', content: 'Weather in Oslo?' }];
    const input = path.join(dir, 'in.jsonl');
    fs.writeFileSync(input, JSON.stringify({ context, response: '', response_tool_calls: [call], tools }) + '\n');
    const { rows, callsLeftOut } = readScoreInput(input, model.tokenizer, 4096);
    expect(callsLeftOut).toBe(0);
    const expected = model.tokenizer.encodeResponse(context, { role: 'assistant', content: '', tool_calls: [call] }, { tools });
    expect(rows).toEqual([expected]);
    fs.writeFileSync(input, JSON.stringify({ context, response: '', response_tool_calls: [{ name: 'x' }] }) + '\n');
    expect(() => readScoreInput(input, model.tokenizer, 4096)).toThrow(/in\.jsonl:1: response_tool_calls must be a list of/);
  });

  it('names the accepted shapes when a line is none of them', async () => {
    const dir = tempDir();
    const input = path.join(dir, 'bad.jsonl');
    fs.writeFileSync(input, '{"prompt":"hi","completion":"hello"}\n');
    const r = await cli('score', '--model', MODEL, '--input', input, '--out', path.join(dir, 'o.jsonl'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('bad.jsonl:1');
    expect(r.stderr).toContain('{"context":[…],"response":"…"}');
  });
});

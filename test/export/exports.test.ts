import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXPORT_FORMATS } from '../../src-shared/views.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { HeuristicJudge } from '../../src-main/judge/verdicts.js';
import { SESSION_002, SORTING, conv, fakeExport, tempDir, tempWorkspace } from '../store/helpers.js';

const FIXTURE = new URL('../fixtures/chatgpt-branches.json', import.meta.url).pathname;

const readLines = (p: string) => fs.readFileSync(p, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

/** The sorting chat, judged, with a repair, a manual hint and a regenerated first reply. */
async function labelledWorkspace() {
  const { ws, dir } = await tempWorkspace();
  const regenerated = { atTurn: 2, turn: { role: 'assistant' as const, text: 'Sure! Which language would you like it in?' } };
  await ws.importExport(
    fakeExport('x.jsonl', [conv('sort', SORTING, { createdAt: 10, alternatives: [regenerated] }), conv('rec', SESSION_002, { createdAt: 20 })]),
  );
  await runJudge(ws, new HeuristicJudge(), { hints: true, force: true });
  ws.setLabel('openai:sort', 4, { repair: 'def sort_list(items, reverse=False):\n    return sorted(items, reverse=reverse)' });
  return { ws, dir };
}

describe('JSONL exports', () => {
  it('samples: every sample with context, reply, next state and label', async () => {
    const { ws, dir } = await labelledWorkspace();
    const out = path.join(dir, 'samples.jsonl');
    expect((await ws.exportJsonl('samples', out)).lines).toBe(5);
    const [first] = readLines(out);
    expect(Object.keys(first).slice(0, 10)).toEqual([
      'session_id', 'response_turn', 'feedback_turn', 'context', 'response', 'feedback', 'timestamp', 'reward', 'hint', 'label_source',
    ]);
    expect(first).toMatchObject({
      session_id: 'openai:sort', response_turn: 2, feedback_turn: 3, reward: -1, label_source: 'heuristic',
      feedback: 'No, I said Python not JavaScript. Please use Python.', hint: 'I said Python not JavaScript. Please use Python.',
    });
    expect(first.context.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
    ws.close();
  });

  it('openclaw: OpenClaw-RL records with prompt text, next state, score, votes and hint', async () => {
    const { ws, dir } = await labelledWorkspace();
    const out = path.join(dir, 'openclaw.jsonl');
    await ws.exportJsonl('openclaw', out);
    const [first] = readLines(out);
    expect(first).toMatchObject({ session_id: 'openai:sort', turn: 2, score: -1, votes: [-1], tool_calls: [], next_state: { role: 'user' } });
    expect(first.prompt_text).toBe(
      '<|im_start|>system\nYou are a helpful coding assistant.<|im_end|>\n<|im_start|>user\nWrite me a function to sort a list in Python.<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(first.response_text).toContain('function sortList');
    ws.close();
  });

  it('kto: only ±1 samples, as TRL prompt/completion/label', async () => {
    const { ws, dir } = await labelledWorkspace();
    const out = path.join(dir, 'kto.jsonl');
    await ws.exportJsonl('kto', out);
    const lines = readLines(out);
    const rewards = ws.listSamples().map((s) => s.label.reward);
    expect(lines).toHaveLength(rewards.filter((r) => r === 1 || r === -1).length);
    expect(lines[0]).toEqual({
      prompt: [
        { role: 'system', content: 'You are a helpful coding assistant.' },
        { role: 'user', content: 'Write me a function to sort a list in Python.' },
      ],
      completion: [{ role: 'assistant', content: SORTING[2][1 as never] }],
      label: false,
    });
    expect(lines.map((l) => l.label)).toEqual(rewards.filter((r) => r === 1 || r === -1).map((r) => r === 1));
    ws.close();
  });

  it('sft: good replies, with a repair replacing the reply it repairs', async () => {
    const { ws, dir } = await labelledWorkspace();
    const out = path.join(dir, 'sft.jsonl');
    await ws.exportJsonl('sft', out);
    const lines = readLines(out);
    const lastContents = lines.map((l) => l.messages.at(-1).content);
    expect(lastContents).toContain('def sort_list(items, reverse=False):\n    return sorted(items, reverse=reverse)');
    expect(lastContents).not.toContain('def sort_list(items):\n    return sorted(items)'); // repaired away
    expect(lastContents.some((c: string) => c.includes('function sortList'))).toBe(false); // judged −1
    expect(lines.every((l) => l.messages.at(-1).role === 'assistant')).toBe(true);
    ws.close();
  });

  it('dpo: pairs from regenerations (kept vs abandoned) and from repairs (repair vs original)', async () => {
    const { ws, dir } = await labelledWorkspace();
    const out = path.join(dir, 'dpo.jsonl');
    await ws.exportJsonl('dpo', out);
    const lines = readLines(out);
    expect(lines).toHaveLength(2);
    expect(lines[0].chosen[0].content).toContain('function sortList');
    expect(lines[0].rejected).toEqual([{ role: 'assistant', content: 'Sure! Which language would you like it in?' }]);
    expect(lines[0].prompt.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
    expect(lines[1].chosen[0].content).toContain('reverse=False');
    expect(lines[1].rejected[0].content).toBe('def sort_list(items):\n    return sorted(items)');
    ws.close();
  });

  it('sdft: samples with a hint, the hint as privileged context and the teacher prompt', async () => {
    const { ws, dir } = await labelledWorkspace();
    const out = path.join(dir, 'sdft.jsonl');
    await ws.exportJsonl('sdft', out);
    const lines = readLines(out);
    expect(lines.length).toBe(ws.listSamples().filter((s) => s.label.hint).length);
    expect(lines[0].privileged_context).toBe('I said Python not JavaScript. Please use Python.');
    expect(lines[0].teacher_prompt.at(-1).content).toBe(
      "Write me a function to sort a list in Python.\n\n[user's hint / instruction]\nI said Python not JavaScript. Please use Python.",
    );
    expect(lines[0].prompt.at(-1).content).toBe('Write me a function to sort a list in Python.');
    ws.close();
  });

  it('every format is byte-identical when repeated, also after reopening the database', async () => {
    const { ws, dir } = await labelledWorkspace();
    const dbPath = ws.dbPath;
    const first = new Map<string, Buffer>();
    for (const f of EXPORT_FORMATS) {
      await ws.exportJsonl(f, path.join(dir, `a-${f}.jsonl`));
      first.set(f, fs.readFileSync(path.join(dir, `a-${f}.jsonl`)));
    }
    ws.close();
    const again = await Workspace.open(dbPath);
    for (const f of EXPORT_FORMATS) {
      await again.exportJsonl(f, path.join(dir, `b-${f}.jsonl`));
      expect(fs.readFileSync(path.join(dir, `b-${f}.jsonl`)).equals(first.get(f)!)).toBe(true);
      expect(first.get(f)!.length).toBeGreaterThan(0);
    }
    expect(again.previewExport('kto', 1)).toEqual([first.get('kto')!.toString().split('\n')[0]]);
    again.close();
    expect(fs.readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('a failed export leaves the previous file in place and names the path', async () => {
    const { ws, dir } = await labelledWorkspace();
    const out = path.join(dir, 'keep.jsonl');
    fs.writeFileSync(out, 'previous\n');
    const asDir = path.join(dir, 'a-directory');
    fs.mkdirSync(asDir);
    await expect(ws.exportJsonl('samples', asDir)).rejects.toThrow(/a-directory: the export failed/);
    await expect(ws.exportJsonl('samples', ws.dbPath)).rejects.toThrow(/that is the database itself/);
    expect(fs.readFileSync(out, 'utf8')).toBe('previous\n');
    ws.close();
  });
});

describe('dpo from a real ChatGPT export', () => {
  it('pairs the kept reply with its regenerated sibling (real importer); identical texts give no pair', async () => {
    const data = JSON.parse(fs.readFileSync(FIXTURE, 'utf8'));
    const dir = tempDir();
    const differs = path.join(dir, 'conversations.json');
    fs.writeFileSync(differs, JSON.stringify(data));
    // The same export, with the regenerated pot answer word for word the kept one: such a pair
    // teaches nothing and is skipped.
    const kept = data[0].mapping['a3'].message.content.parts[0];
    data[0].mapping['a3-first'].message.content.parts = [kept];
    const same = path.join(dir, 'same.json');
    fs.writeFileSync(same, JSON.stringify(data));

    const a = await Workspace.open(path.join(dir, 'a.db'));
    await a.importFiles([same]);
    expect(a.previewExport('dpo', 10)).toEqual([]);
    a.close();

    const b = await Workspace.open(path.join(dir, 'b.db'));
    await b.importFiles([differs]);
    const lines = b.previewExport('dpo', 10).map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0].chosen[0].content).toBe(kept);
    expect(lines[0].rejected[0].content).toBe('Any pot will do.');
    expect(lines[0].prompt.at(-1)).toEqual({ role: 'user', content: 'What pot size should a 30 cm plant live in?' });
    b.close();
  });
});

// The lessons as the Ollama Modelfile's SYSTEM (docs/design.md §Lessons): written in triple quotes
// the way Ollama's parser reads them back, replacing the template's default system prompt; and
// `hindsight export-model --lessons` writing the database's lessons there.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LESSONS_HEADER } from '../../src-shared/lessons.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { buildModelfile, tripleQuoted } from '../../src-main/model/ollama-modelfile.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { runCli } from '../helpers/cli.js';
import { conv, fakeExport } from '../store/helpers.js';
import { Workspace } from '../../src-main/workspace/workspace.js';

/**
 * The commands of a Modelfile as Ollama reads them, after its parser/parser.go (ParseFile and
 * unquote; checked against it once): a value has no escapes; it ends at a line break (or the end)
 * once what was read, trimmed, is a whole value: unquoted, "…", or """…""" (at least six
 * characters, ending in """), whose quotes are then taken off; only printable characters (and the
 * line breaks and tabs inside an open value) are kept.
 */
function ollamaCommands(text: string): { name: string; args: string }[] {
  const printable = (c: string) => c === ' ' || /[\p{L}\p{M}\p{N}\p{P}\p{S}]/u.test(c);
  const unquote = (s: string): string | null => {
    if (s.startsWith('"""')) return s.length >= 6 && s.endsWith('"""') ? s.slice(3, -3) : null;
    if (s.startsWith('"')) return s.length >= 2 && s.endsWith('"') ? s.slice(1, -1) : null;
    return s;
  };
  const out: { name: string; args: string }[] = [];
  let i = 0;
  const chars = [...text];
  while (i < chars.length) {
    while (i < chars.length && /[ \t\r\n]/.test(chars[i]!)) i++;
    if (i >= chars.length) break;
    if (chars[i] === '#') {
      while (i < chars.length && chars[i] !== '\n') i++;
      continue;
    }
    let name = '';
    while (i < chars.length && /[A-Za-z]/.test(chars[i]!)) name += chars[i++];
    i++; // the space after the name
    if (name.toLowerCase() === 'parameter') {
      let p = '';
      while (/[A-Za-z0-9_]/.test(chars[i]!)) p += chars[i++];
      name = p;
      i++;
    }
    let value = '';
    for (;;) {
      const c = chars[i++];
      if (c === undefined) {
        const v = unquote(value.trim());
        if (v === null) throw new Error('unexpected EOF');
        out.push({ name: name.toLowerCase(), args: v });
        break;
      }
      if (c === '\n' || c === '\r') {
        const v = unquote(value.trim());
        if (v !== null) {
          out.push({ name: name.toLowerCase(), args: v });
          break;
        }
        value += c;
      } else if (c === '\t' || printable(c)) value += c;
    }
  }
  return out;
}

const systemOf = (modelfile: string) => ollamaCommands(modelfile).filter((c) => c.name === 'system').map((c) => c.args);

const SMOL = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
const LESSONS = `${LESSONS_HEADER}\n- Answer in Python unless asked otherwise.\n- Say "I don't know" when unsure.`;

describe("the Modelfile's SYSTEM", () => {
  it("holds the lessons, replacing the template's default system prompt, as Ollama reads them", () => {
    const without = buildModelfile({ base: '/m.gguf', adapter: '/a.gguf', chatTemplate: SMOL, stopTokens: [] });
    expect(systemOf(without.text)).toEqual(['You are a helpful AI assistant named SmolLM, trained by Hugging Face']);
    const mf = buildModelfile({ base: '/m.gguf', adapter: '/a.gguf', chatTemplate: SMOL, stopTokens: [], system: `\n${LESSONS}\n` });
    expect(mf.text).toContain(`SYSTEM """${LESSONS}"""\n`);
    expect(systemOf(mf.text)).toEqual([LESSONS]);
    expect(ollamaCommands(mf.text).map((c) => c.name)).toEqual(['from', 'adapter', 'template', 'system', 'stop']);
    expect(mf.notes.at(-1)).toBe('SYSTEM holds the lessons: Ollama gives them to every chat that sends no system message of its own (one that does replaces them)');
    // Without a template it maps, the lessons are written all the same.
    expect(systemOf(buildModelfile({ base: '/m.gguf', adapter: '/a.gguf', chatTemplate: '[INST]', stopTokens: ['</s>'], system: LESSONS }).text)).toEqual([LESSONS]);
  });

  it('follows the triple-quote rules: no line may end in """, and Ollama keeps printable characters only', () => {
    const cases: [string, string][] = [
      ['- Quote """inline""" is fine', '- Quote """inline""" is fine'],
      ['- A line ending in """\n- next', '- A line ending in ""”\n- next'],
      ['- Spaces after """   \n- next', '- Spaces after ""”   \n- next'],
      ['- Ends in a quote "', '- Ends in a quote "'],
      ['- Ends in two ""', '- Ends in two ""'],
      ['"""', '""”'],
      ['- Windows\r\n- line\tends', '- Windows\n- line\tends'],
      ['- no\u00a0break space, zero\u200bwidth, bell\u0007', '- no break space, zerowidth, bell'],
      ['- Ünïcödé ✓ 日本語 stays', '- Ünïcödé ✓ 日本語 stays'],
    ];
    for (const [text, read] of cases) {
      const { value, changed } = tripleQuoted(text);
      expect(ollamaCommands(`FROM /m.gguf\nSYSTEM ${value}\nPARAMETER stop "x"\n`)).toEqual([
        { name: 'from', args: '/m.gguf' }, { name: 'system', args: read }, { name: 'stop', args: 'x' },
      ]);
      expect(changed).toBe(read !== text);
    }
    const mf = buildModelfile({ base: '/m.gguf', adapter: '/a.gguf', stopTokens: [], system: '- End with """' });
    expect(mf.notes.at(-1)).toMatch(/a line ending in """ ends in ” instead/);
  });
});

describe('hindsight export-model --lessons', () => {
  let dir: string, model: string, run: string, db: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-modelfile-'));
    model = path.join(dir, 'tiny');
    writeTinyModel(model, { family: 'llama', seed: 2 });
    run = path.join(dir, 'run');
    const specs = loraSpecs(Checkpoint.open(model).config, ['q', 'v']);
    writeAdapter(run, { lora: { r: 2, alpha: 4, targets: ['q', 'v'] }, specs, weights: initLora(specs, 2, 1), baseModel: model });
    db = path.join(dir, 'h.db');
    const ws = await Workspace.open(db);
    await ws.importExport(fakeExport('c.jsonl', [conv('c', [['user', 'Hi'], ['assistant', 'Hello'], ['user', 'Thanks']])]));
    ws.close();
  }, 60_000);
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("writes the database's lessons as SYSTEM, and refuses in one line when it has none", async () => {
    const none = await runCli('export-model', '--run', run, '--model', model, '--out', path.join(dir, 'out0'), '--lessons', '--db', db);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(`hindsight export-model: --lessons: ${db} has no lessons yet (hindsight lessons --regenerate --db ${db})\n`);
    const file = path.join(dir, 'lessons.txt');
    fs.writeFileSync(file, LESSONS);
    expect((await runCli('lessons', '--set', file, '--db', db)).code).toBe(0);
    const r = await runCli('export-model', '--run', run, '--model', model, '--out', path.join(dir, 'out'), '--lessons', '--db', db, '--json');
    expect(r.code).toBe(0);
    expect(systemOf(fs.readFileSync(r.json().modelfile, 'utf8'))).toEqual([LESSONS]);
    expect(r.json().notes).toContain('SYSTEM holds the lessons: Ollama gives them to every chat that sends no system message of its own (one that does replaces them)');
    const plain = await runCli('export-model', '--run', run, '--model', model, '--out', path.join(dir, 'out2'), '--json');
    expect(systemOf(fs.readFileSync(plain.json().modelfile, 'utf8'))).toEqual([]);
    expect((await runCli('export-model', '--run', run, '--model', model, '--out', path.join(dir, 'out3'), '--db', db)).code).toBe(2);
  }, 60_000);
});

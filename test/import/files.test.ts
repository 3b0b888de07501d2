// Input forms (split-file directory, zip) and unreadable files (truncated, binary, wrong format).
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UserError } from '../../src-shared/types.js';
import { openExport } from '../../src-main/import/importer.js';
import { chatgptConversation, importAll, tempDir, writeJson, writeText, writeZip } from './helpers.js';

const dir = tempDir();

function chat(id: string, question = 'Q', answer = 'A') {
  return chatgptConversation(
    [
      { id: 'root', parent: null },
      { id: `${id}-u`, parent: 'root', role: 'user', text: question },
      { id: `${id}-a`, parent: `${id}-u`, role: 'assistant', text: answer },
    ],
    { conversation_id: id, id, title: `Chat ${id}` },
  );
}

/** Expects a one-line UserError whose message matches every pattern. */
async function expectUserError(run: () => Promise<unknown>, ...patterns: RegExp[]): Promise<UserError> {
  let caught: unknown;
  try {
    await run();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(UserError);
  const message = (caught as UserError).message;
  expect(message).not.toContain('\n');
  for (const pattern of patterns) expect(message).toMatch(pattern);
  return caught as UserError;
}

const drain = async (file: string) => {
  const opened = await openExport(file);
  let n = 0;
  for await (const _ of opened.conversations()) n++;
  return n;
};

describe('split ChatGPT export in a directory', () => {
  it('imports the parts in order and hashes them concatenated', async () => {
    const split = path.join(dir, 'split');
    mkdirSync(split);
    // Written out of order, and with more than 10 parts to check numeric ordering.
    const ids = Array.from({ length: 11 }, (_, i) => `c${i}`);
    for (const i of [10, 2, 0, 1, 3, 4, 5, 6, 7, 8, 9]) writeJson(split, `conversations-${String(i).padStart(3, '0')}.json`, [chat(ids[i]!)]);
    const names = ids.map((_, i) => `conversations-${String(i).padStart(3, '0')}.json`);
    writeJson(split, 'export_manifest.json', { export_files: names.map((n) => ({ path: n })) });
    writeText(split, 'chat.html', '<html></html>');
    const { opened, conversations } = await importAll(split);
    expect(opened.format).toBe('chatgpt');
    expect(conversations.map((c) => c.externalId)).toEqual(ids);
    const hash = createHash('sha256');
    for (const name of names) hash.update(readFileSync(path.join(split, name)));
    expect(opened.sha256).toBe(hash.digest('hex'));
    expect(opened.warnings).toEqual([]);
  });

  it('warns about parts the manifest lists but the directory lacks', async () => {
    const split = path.join(dir, 'split-missing');
    mkdirSync(split);
    writeJson(split, 'conversations-000.json', [chat('x')]);
    writeJson(split, 'export_manifest.json', { files: ['conversations-000.json', 'conversations-001.json'] });
    const { opened, conversations } = await importAll(split);
    expect(conversations).toHaveLength(1);
    expect(opened.warnings).toEqual([`${path.join(split, 'export_manifest.json')}: lists files that are missing: conversations-001.json`]);
  });

  it('rejects a directory without conversation files', async () => {
    const empty = path.join(dir, 'empty-dir');
    mkdirSync(empty);
    await expectUserError(() => openExport(empty), /empty-dir: a directory must hold conversations\.json/);
  });
});

describe('zip archives', () => {
  it('streams conversations.json out of a ChatGPT export zip, ignoring the other entries', async () => {
    const zip = writeZip(path.join(dir, 'export.zip'), [
      { name: 'chat.html', data: '<html>…</html>' },
      { name: 'user.json', data: '{"id":"user-1"}' },
      { name: 'file-abc.png', data: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0]), deflate: false },
      { name: 'conversations.json', data: JSON.stringify([chat('z1'), chat('z2')]) },
      { name: 'message_feedback.json', data: '[]' },
    ]);
    const { opened, conversations } = await importAll(zip);
    expect(opened.format).toBe('chatgpt');
    expect(opened.path).toBe(zip);
    expect(opened.sha256).toBe(createHash('sha256').update(readFileSync(zip)).digest('hex'));
    expect(conversations.map((c) => c.externalId)).toEqual(['z1', 'z2']);
  });

  it('reads split parts inside a zip in order, stored or deflated', async () => {
    const zip = writeZip(path.join(dir, 'split.zip'), [
      { name: 'export/conversations-001.json', data: JSON.stringify([chat('p1')]), deflate: false },
      { name: 'export/conversations-000.json', data: JSON.stringify([chat('p0')]) },
      { name: 'export/export_manifest.json', data: '{}' },
    ]);
    const { conversations } = await importAll(zip);
    expect(conversations.map((c) => c.externalId)).toEqual(['p0', 'p1']);
  });

  it('refuses an archive with an entry that climbs out of its folder', async () => {
    const zip = writeZip(path.join(dir, 'evil.zip'), [
      { name: 'conversations.json', data: JSON.stringify([chat('e')]) },
      { name: '../../evil.json', data: '[]' },
    ]);
    await expectUserError(() => openExport(zip), /evil\.zip/, /\.\.\/\.\.\/evil\.json/);
  });

  it('refuses an absolute entry name', async () => {
    const zip = writeZip(path.join(dir, 'absolute.zip'), [{ name: '/etc/conversations.json', data: '[]' }]);
    await expectUserError(() => openExport(zip), /absolute\.zip/, /\/etc\/conversations\.json/);
  });

  it('says so when an archive holds no conversations', async () => {
    const zip = writeZip(path.join(dir, 'photos.zip'), [
      { name: 'a.png', data: 'x' },
      { name: 'b.json', data: '{}' },
      { name: 'c.json', data: '{}' },
    ]);
    await expectUserError(() => openExport(zip), /photos\.zip: the archive holds no conversations\.json/);
  });

  it('takes the only JSONL file of an archive that has no conversations.json', async () => {
    const zip = writeZip(path.join(dir, 'dataset.zip'), [
      { name: 'README.md', data: '# data' },
      { name: 'train.jsonl', data: '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"}]}\n' },
    ]);
    const { opened, conversations } = await importAll(zip);
    expect(opened.format).toBe('openai');
    expect(conversations).toHaveLength(1);
  });

  it('reports a truncated zip entry as unreadable', async () => {
    const full = JSON.stringify([chat('t1'), chat('t2')]);
    const zip = writeZip(path.join(dir, 'cut-entry.zip'), [{ name: 'conversations.json', data: full.slice(0, full.length - 40) }]);
    await expectUserError(() => drain(zip), /cut-entry\.zip:conversations\.json/, /byte \d+/, /truncated/);
  });
});

describe('unreadable files', () => {
  it('a truncated JSON file: the iterator throws, naming the file and the byte offset', async () => {
    const full = JSON.stringify([chat('t1'), chat('t2'), chat('t3')]);
    const cut = full.slice(0, Math.floor(full.length * 0.8));
    const file = writeText(dir, 'truncated.json', cut);
    // Detection reads only the first conversation, so opening succeeds …
    const opened = await openExport(file);
    expect(opened.format).toBe('chatgpt');
    // … and reading hits the end of the data mid-value.
    const error = await expectUserError(() => drain(file), /truncated\.json/, /truncated/);
    expect(error.message).toContain(`at byte ${Buffer.byteLength(cut)}`);
  });

  it('a corrupt JSON file: the iterator throws, naming the file and the place', async () => {
    const file = writeText(dir, 'corrupt.json', `[${JSON.stringify(chat('k1'))}, {"title": "x" "oops": 1}]`);
    await expectUserError(() => drain(file), /corrupt\.json: invalid JSON near byte \d+/);
  });

  it('a truncated JSONL file: names the last line', async () => {
    const file = writeText(dir, 'cut.jsonl', '{"messages":[{"role":"user","content":"Hi"}]}\n{"messages":[{"role":"us');
    await expectUserError(() => drain(file), /cut\.jsonl: line 2, the last, is not valid JSON/, /truncated/);
  });

  it('a JSONL file with a broken line in the middle: names the line', async () => {
    const file = writeText(dir, 'broken.jsonl', '{"messages":[]}\n{"messages":[}\n{"messages":[]}\n');
    await expectUserError(() => drain(file), /broken\.jsonl: line 2 is not valid JSON/);
  });

  it('a binary file', async () => {
    const bytes = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x00, 0xff, 0xfe, 0x01, 0x02]);
    const file = writeText(dir, 'image.bin', bytes);
    await expectUserError(() => openExport(file), /image\.bin: binary data at byte 5/);
    const latin1 = writeText(dir, 'latin1.json', Buffer.from('[{"title":"caf\xe9"}]', 'latin1'));
    await expectUserError(() => openExport(latin1), /latin1\.json: binary data at byte 14/);
  });

  it('a JSON file of another kind lists the supported formats', async () => {
    const file = writeJson(dir, 'package.json', { name: 'x', version: '1.0.0' });
    await expectUserError(
      () => openExport(file),
      /package\.json: not a supported chat export \(the top-level object has keys: name, version\)/,
      /Supported formats: chatgpt .*claude .*sharegpt .*openai .*messages .*openwebui/,
    );
    const numbers = writeJson(dir, 'numbers.json', [1, 2, 3]);
    await expectUserError(() => openExport(numbers), /its first element is a number/, /Supported formats/);
  });

  it('a text file that is not JSON, an empty file, a missing file', async () => {
    await expectUserError(() => openExport(writeText(dir, 'notes.txt', 'hello world')), /notes\.txt: not JSON or JSONL \(it starts with "hello world"/, /Supported formats/);
    await expectUserError(() => openExport(writeText(dir, 'empty.json', '  \n')), /empty\.json: the file is empty/);
    await expectUserError(() => openExport(path.join(dir, 'nope.json')), /nope\.json: cannot read it \(ENOENT\)/);
  });

  it('an empty export array imports nothing, with a warning', async () => {
    const { conversations, opened } = await importAll(writeJson(dir, 'none.json', []));
    expect(conversations).toEqual([]);
    expect(opened.warnings).toEqual([`${path.join(dir, 'none.json')}: holds no conversations`]);
  });
});

describe('forcing a format', () => {
  it('refuses a file that is clearly another known format, naming the format it looks like', async () => {
    const file = writeJson(dir, 'forced.json', [chat('f1')]);
    await expectUserError(() => openExport(file, 'claude'), /forced\.json/, /looks like a chatgpt export, not claude/, /chatgpt or auto/);
    const claude = writeJson(dir, 'claude-forced.json', [{ uuid: 'c1', name: 'C', chat_messages: [] }]);
    await expectUserError(() => openExport(claude, 'sharegpt'), /looks like a claude export, not sharegpt/);
  });

  it('accepts openai and messages for each other: they share one converter', async () => {
    const file = writeText(dir, 'chat.jsonl', JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }] }) + '\n');
    expect((await importAll(file, 'messages')).conversations).toHaveLength(1);
    expect((await importAll(file, 'openai')).conversations).toHaveLength(1);
  });

  it('uses the forced converter where detection finds nothing; records that do not fit are skipped with warnings', async () => {
    const file = writeJson(dir, 'unclear.json', [{ id: 'f1', title: 'Chat f1', turns: [] }]);
    const { opened, conversations } = await importAll(file, 'claude');
    expect(opened.format).toBe('claude');
    expect(conversations).toEqual([]);
    expect(opened.warnings).toEqual([`${file}: conversation f1 “Chat f1” (conversation #1) skipped: it has no "chat_messages"`]);
  });

  it('rejects an unknown format name', async () => {
    await expectUserError(() => openExport(path.join(dir, 'forced.json'), 'bard' as never), /unknown format 'bard'/);
  });

  it('a fresh pass each time conversations() is called', async () => {
    const opened = await openExport(writeJson(dir, 'twice.json', [chat('a'), chat('b')]));
    const once = [];
    for await (const c of opened.conversations()) once.push(c.externalId);
    const again = [];
    for await (const c of opened.conversations()) again.push(c.externalId);
    expect(again).toEqual(once);
    expect(once).toEqual(['a', 'b']);
  });
});

describe('byte-order marks', () => {
  it('accepts a UTF-8 BOM before JSON and JSONL', async () => {
    const bom = '\ufeff';
    const json = writeText(dir, 'bom.json', bom + JSON.stringify([chat('bom')]));
    expect((await importAll(json)).conversations.map((c) => c.externalId)).toEqual(['bom']);
    const lines = writeText(dir, 'bom.jsonl', bom + '{"messages":[{"role":"user","content":"Hi"}]}\n{"messages":[{"role":"user","content":"Yo"}]}\n');
    const { opened, conversations } = await importAll(lines);
    expect(opened.format).toBe('openai');
    expect(conversations).toHaveLength(2);
  });
});

// A folder of exports imported in one go (src-main/import/folder-inputs.ts through the workspace),
// each file's result listed; links and non-regular files refused with one line; an export folder
// (conversations.json or split files) kept as one input; titles and dates for the formats that
// have none (Hugging Face messages, ShareGPT).
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pickFolderFiles, FOLDER_MAX_DEPTH } from '../../src-shared/import-files.js';
import { titleFromTurns, TITLE_FROM_MESSAGE_CHARS } from '../../src-main/import/common.js';
import { expandImportPaths } from '../../src-main/import/folder-inputs.js';
import { tempWorkspace } from '../store/helpers.js';
import { chatgptConversation, importAll, tempDir, writeJson, writeText } from './helpers.js';

const dir = tempDir();

const hf = (question: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ messages: [{ role: 'user', content: question }, { role: 'assistant', content: 'An answer.' }, { role: 'user', content: 'Thanks, that works.' }], ...extra });

function chat(id: string) {
  return chatgptConversation(
    [
      { id: 'root', parent: null },
      { id: `${id}-u`, parent: 'root', role: 'user', text: 'Q' },
      { id: `${id}-a`, parent: `${id}-u`, role: 'assistant', text: 'A' },
    ],
    { conversation_id: id, id, title: `Chat ${id}` },
  );
}

/** exports/ with a JSONL, a ShareGPT file, a ChatGPT export folder, a subfolder, a stray JSON, a link and a FIFO. */
function folderOfExports(): string {
  const root = path.join(dir, 'exports');
  mkdirSync(path.join(root, 'chatgpt-2024'), { recursive: true });
  mkdirSync(path.join(root, 'more', 'deeper'), { recursive: true });
  writeText(root, 'hf.jsonl', hf('How do I  repot\na snake plant?', { created_at: '2024-03-05T10:00:00Z' }) + '\n');
  writeJson(root, 'share.json', [{ conversations: [{ from: 'human', value: 'Plan a weekend in Lyon' }, { from: 'gpt', value: 'Day one…' }, { from: 'human', value: 'Great' }] }]);
  writeJson(path.join(root, 'chatgpt-2024'), 'conversations.json', [chat('c1'), chat('c2')]);
  writeText(path.join(root, 'chatgpt-2024'), 'chat.html', '<html></html>');
  writeText(path.join(root, 'more', 'deeper'), 'late.jsonl', hf('One more question') + '\n');
  writeJson(root, 'package.json', { name: 'not-a-chat', version: '1.0.0' });
  writeText(root, 'notes.txt', 'left alone');
  writeText(root, '.hidden.json', 'not looked at');
  symlinkSync(path.join(root, 'hf.jsonl'), path.join(root, 'link.jsonl'));
  execFileSync('mkfifo', [path.join(root, 'pipe.json')]);
  return root;
}

describe('a folder of exports', () => {
  it('imports every export in it, lists each file, skips a non-chat JSON and refuses links and FIFOs', async () => {
    const root = folderOfExports();
    const { ws } = await tempWorkspace();
    const summary = await ws.importFiles([root]);
    const byName = Object.fromEntries(summary.files.map((f) => [path.relative(root, f.path), f]));
    expect(Object.keys(byName).sort()).toEqual(['chatgpt-2024', 'hf.jsonl', 'link.jsonl', 'more/deeper/late.jsonl', 'package.json', 'pipe.json', 'share.json']);
    expect(byName['chatgpt-2024']).toMatchObject({ outcome: 'imported', format: 'chatgpt', sessions_added: 2 });
    expect(byName['hf.jsonl']).toMatchObject({ outcome: 'imported', sessions_added: 1, samples: 1 });
    expect(byName['share.json']).toMatchObject({ outcome: 'imported', format: 'sharegpt', sessions_added: 1 });
    expect(byName['more/deeper/late.jsonl']).toMatchObject({ outcome: 'imported', sessions_added: 1 });
    expect(byName['package.json']).toMatchObject({ outcome: 'skipped', sessions_added: 0 });
    expect(byName['package.json']!.reason).toBe('not a supported chat export (the top-level object has keys: name, version).');
    expect(byName['link.jsonl']).toMatchObject({ outcome: 'refused' });
    expect(byName['link.jsonl']!.reason).toMatch(/symbolic link/);
    expect(byName['pipe.json']).toMatchObject({ outcome: 'refused' });
    expect(byName['pipe.json']!.reason).toMatch(/not a regular file/);
    for (const f of summary.files) if (f.reason) expect(f.reason).not.toContain('\n');
    expect(summary).toMatchObject({ sessions_added: 5 });
    expect(summary.added_ids).toHaveLength(5);
    expect(summary.warnings).toContain(`${root}: 1 file not .json, .jsonl or .zip left alone`);
    expect(ws.stats().sessions).toBe(5);

    // Titles from the first user message, dates where the file has one.
    const sessions = ws.listSessions({ sort: 'title', order: 'asc' }).sessions;
    expect(sessions.map((s) => s.title)).toEqual(['Chat c1', 'Chat c2', 'How do I repot a snake plant?', 'One more question', 'Plan a weekend in Lyon']);
    const plant = sessions.find((s) => s.title.startsWith('How do I'))!;
    expect(plant.createdAt).toBe(Date.parse('2024-03-05T10:00:00Z') / 1000);
    expect(sessions.find((s) => s.title === 'Plan a weekend in Lyon')!.createdAt).toBeNull();

    // Again: nothing new, every file unchanged.
    const again = await ws.importFiles([root]);
    expect(again).toMatchObject({ sessions_added: 0, sessions_unchanged: 5, added_ids: [] });
    ws.close();
  });

  it('keeps a folder holding conversations.json as one export, as before', async () => {
    const only = path.join(dir, 'one-export');
    mkdirSync(only);
    writeJson(only, 'conversations.json', [chat('x1')]);
    writeJson(only, 'user.json', { id: 'u' });
    expect(await expandImportPaths([only])).toEqual({ inputs: [{ path: only, folder: null }], refused: [], notes: [] });
  });

  it('refuses, in one line, a folder with no export in it', async () => {
    const empty = path.join(dir, 'no-exports');
    mkdirSync(empty);
    writeText(empty, 'readme.txt', 'x');
    const { ws } = await tempWorkspace();
    await expect(ws.importFiles([empty])).rejects.toThrow(/no-exports: no chat export in this folder/);
    ws.close();
  });

  it('stops at the depth bound, with one line for the folder it did not enter', async () => {
    const deep = path.join(dir, 'deep');
    let at = deep;
    for (let i = 0; i <= FOLDER_MAX_DEPTH; i++) at = path.join(at, `d${i}`);
    mkdirSync(at, { recursive: true });
    writeText(at, 'far.jsonl', hf('Far away') + '\n');
    writeText(deep, 'near.jsonl', hf('Close by') + '\n');
    const expanded = await expandImportPaths([deep]);
    expect(expanded.inputs.map((i) => path.basename(i.path))).toEqual(['near.jsonl']);
    expect(expanded.refused).toHaveLength(1);
    expect(expanded.refused[0]!.reason).toMatch(new RegExp(`more than ${FOLDER_MAX_DEPTH} folders below`));
  });

  it('still stops the whole import on a file named by path that is not a chat export', async () => {
    const { ws } = await tempWorkspace();
    const stray = writeJson(dir, 'stray.json', { name: 'x' });
    await expect(ws.importFiles([stray])).rejects.toThrow(/stray\.json: not a supported chat export/);
    expect(ws.stats().sessions).toBe(0);
    ws.close();
  });
});

describe('the folder upload rule (the Import panel)', () => {
  it('takes exports, an export folder’s conversation files only, and leaves other files alone', () => {
    const pick = pickFolderFiles([
      'exports/hf.jsonl', 'exports/notes.txt', 'exports/chatgpt/conversations.json', 'exports/chatgpt/user.json', 'exports/chatgpt/sub/x.json',
      'exports/.git/config.json', 'exports/claude.zip', 'exports/__MACOSX/hf.jsonl',
    ]);
    expect(pick).toEqual({ files: ['exports/chatgpt/conversations.json', 'exports/claude.zip', 'exports/hf.jsonl'], leftAlone: 1, refused: [] });
  });
});

describe('titles and dates for exports without them', () => {
  it('names a Hugging Face or ShareGPT conversation by its first user message, cut at a word', () => {
    const long = 'Please explain, in as much detail as you can manage, how the borrow checker decides that two references overlap';
    const title = titleFromTurns([{ role: 'system', text: 'Be brief.' }, { role: 'user', text: '[image]' }, { role: 'user', text: long }])!;
    expect(title.length).toBeLessThanOrEqual(TITLE_FROM_MESSAGE_CHARS);
    expect(title).toMatch(/^Please explain, in as much detail .*\w…$/);
    expect(titleFromTurns([{ role: 'assistant', text: 'Hello' }])).toBeUndefined();
  });

  it('takes a ShareGPT record’s date field and an HF record’s first message time', async () => {
    const file = writeJson(dir, 'dated.json', [
      { conversations: [{ from: 'human', value: 'Dated' }, { from: 'gpt', value: 'Yes' }], created_at: 1700000000 },
    ]);
    const { conversations } = await importAll(file);
    expect(conversations[0]).toMatchObject({ title: 'Dated', createdAt: 1700000000 });
    const timed = writeText(dir, 'timed.jsonl', JSON.stringify({ messages: [{ role: 'user', content: 'Timed', timestamp: 1710000000 }, { role: 'assistant', content: 'ok' }] }) + '\n');
    const { conversations: hfConversations } = await importAll(timed);
    expect(hfConversations[0]).toMatchObject({ title: 'Timed', createdAt: 1710000000 });
  });
});

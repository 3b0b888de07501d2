// Test helpers: hand-built conversations and exports, and temp databases.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BranchAlternative, ImportedConversation, ImportedTurn, Role, SourceFormat } from '../../src-shared/types.js';
import { Workspace, type OpenedExportLike } from '../../src-main/workspace/workspace.js';

export type TurnSpec = [Role, string] | ImportedTurn;

export function conv(externalId: string | undefined, turns: TurnSpec[], extra: Partial<ImportedConversation> = {}): ImportedConversation {
  return {
    externalId,
    title: extra.title ?? externalId ?? 'untitled',
    createdAt: extra.createdAt,
    turns: turns.map((t) => (Array.isArray(t) ? { role: t[0], text: t[1] } : t)),
    alternatives: extra.alternatives ?? ([] as BranchAlternative[]),
    metadata: extra.metadata ?? {},
    warnings: extra.warnings ?? [],
  };
}

/** An OpenedExport over conversations built in the test; `failAfter` throws mid-stream. */
export function fakeExport(name: string, conversations: ImportedConversation[], options: { format?: SourceFormat; failAfter?: number } = {}): OpenedExportLike {
  const sha256 = createHash('sha256').update(JSON.stringify(conversations)).digest('hex');
  return {
    path: name,
    format: options.format ?? 'openai',
    sha256,
    warnings: [],
    async *conversations() {
      let n = 0;
      for (const c of conversations) {
        if (options.failAfter !== undefined && n === options.failAfter) throw new Error('unexpected end of JSON input at byte 1234');
        n++;
        yield c;
      }
    },
  };
}

export function tempDir(prefix = 'hindsight-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function tempWorkspace(): Promise<{ ws: Workspace; dir: string; dbPath: string }> {
  const dir = tempDir();
  const dbPath = path.join(dir, 'test.db');
  const ws = await Workspace.open(dbPath, { persist: { debounceMs: 20, maxWaitMs: 100 } });
  return { ws, dir, dbPath };
}

/** An 8-turn sorting conversation (docs/design.md §Samples and next states). */
export const SORTING: TurnSpec[] = [
  ['system', 'You are a helpful coding assistant.'],
  ['user', 'Write me a function to sort a list in Python.'],
  ['assistant', 'function sortList(list) {\n  return [...list].sort((a, b) => a - b);\n}'],
  ['user', 'No, I said Python not JavaScript. Please use Python.'],
  ['assistant', 'def sort_list(items):\n    return sorted(items)'],
  ['user', 'Perfect, thanks! Can you also add a reverse parameter?'],
  ['assistant', 'def sort_list(items, reverse=False):\n    return sorted(items, reverse=reverse)'],
  ['user', 'Great, exactly what I needed!'],
];

/** The three-session example: 6 turns with a system turn, 5 turns, 7 turns. */
export const SESSION_001: TurnSpec[] = [
  ['system', 'You are a concise geography tutor.'],
  ['user', 'What is the capital of France?'],
  ['assistant', 'The capital of France is Paris.'],
  ['user', 'Thanks! And what about Germany?'],
  ['assistant', 'The capital of Germany is Berlin.'],
  ['user', 'Great, thank you!'],
];
export const SESSION_002: TurnSpec[] = [
  ['user', 'Can you explain recursion?'],
  ['assistant', 'Recursion is when a function solves a problem by calling itself on a smaller piece of the same problem.'],
  ['user', 'That is too abstract. Can you give me an example in code?'],
  ['assistant', 'def factorial(n):\n    return 1 if n <= 1 else n * factorial(n - 1)'],
  ['user', 'That makes sense now, thanks!'],
];
export const SESSION_003: TurnSpec[] = [
  ['user', 'Should I use Flask or Django for a small REST API?'],
  ['assistant', 'It depends on what you need. Both are Python web frameworks with different philosophies.'],
  ['user', "I don't know much about either. Which one is simpler to start with?"],
  ['assistant', 'Flask is simpler: a minimal core, and you add extensions as you need them.'],
  ['user', 'No, I meant for a project that will grow a lot later.'],
  ['assistant', 'Then Django: its ORM, admin and auth scale with a growing project.'],
  ['user', "Perfect, I'll go with Django."],
];

/**
 * Trains on every session: no session is held out for evaluation (docs/design.md §Evaluation).
 * For tests of what training takes, which would otherwise lose the session the split holds out.
 */
export function trainOnEverySession(ws: Workspace): void {
  ws.setHeldOut(ws.listSessions().sessions.map((s) => s.id), false);
}

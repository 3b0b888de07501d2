/**
 * The app's lessons (docs/design.md §Lessons): what the Lessons page shows and edits, its
 * Distil button (the same distillation as `hindsight lessons --regenerate`: the LLM judge of the
 * Settings page, rules with the heuristic or when the judge's answer holds none), and the text
 * file the Export page writes. One distillation at a time; the lessons live in the database.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { LessonsView } from '../../src-shared/lessons.js';
import { UserError } from '../../src-shared/types.js';
import type { LlmJudgeSpec } from '../judge/backends.js';
import { distillerName, distilLessonsInto } from '../judge/lessons-judge.js';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';

export interface LessonsHooks {
  workspace: () => WorkspaceApi;
  /** The LLM judge of the Settings page; null for the heuristic (rules distil). */
  judge: () => LlmJudgeSpec | null;
}

export class LessonsService {
  private distilling = false;

  constructor(private readonly hooks: LessonsHooks) {}

  view(): LessonsView {
    const ws = this.hooks.workspace();
    const { hints, heldOut } = ws.lessonHints();
    return { lessons: ws.lessons(), hints: hints.length, heldOutHints: heldOut, distiller: distillerName(this.hooks.judge()) };
  }

  /** The stored lessons' text, or one line saying there are none (the Modelfile's SYSTEM, the text file). */
  text(): string {
    const text = this.hooks.workspace().lessons()?.text;
    if (!text) throw new UserError('There are no lessons yet: distil them on the Lessons page first.');
    return text;
  }

  save(text: string): LessonsView {
    const clean = text.trim();
    this.hooks.workspace().setLessons(clean ? { text: clean, source: 'edited', judge: null, hints: 0, updatedAt: Date.now(), note: null } : null);
    return this.view();
  }

  async distil(): Promise<LessonsView> {
    if (this.distilling) throw new UserError('The lessons are being distilled already; wait for it.');
    this.distilling = true;
    try {
      const ws = this.hooks.workspace();
      await distilLessonsInto(ws, this.hooks.judge());
      return this.view();
    } finally {
      this.distilling = false;
    }
  }

  /** Writes the lessons to `outPath` (owner-only: they come from private chats). */
  write(outPath: string): { path: string; chars: number } {
    const text = this.text();
    const resolved = path.resolve(outPath);
    if (fs.existsSync(resolved) && fs.statSync(resolved).isDirectory()) throw new UserError(`${resolved} is a folder; give a file name such as ${path.join(resolved, 'lessons.txt')}`);
    writeFileAtomicSync(resolved, Buffer.from(text + '\n', 'utf8'), PRIVATE_FILE_MODE);
    return { path: resolved, chars: text.length };
  }
}

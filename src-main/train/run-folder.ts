/**
 * The output folder of a run (docs/design.md §Training runs). A folder that already holds a
 * run is never written over by accident: continuing it takes `resume`, starting over takes
 * `overwrite`, which first moves the old run aside (one rename, so a kill at any moment
 * leaves either the whole old run or none of it in the folder) and then deletes it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { CHECKPOINTS_DIR } from './run-checkpoint.js';
import { LOG_FILE } from './trainer-log.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS } from './peft.js';

export const DATASET_FILE = 'dataset.jsonl';

/** What a run writes into its folder; any of them means the folder holds a run. */
const RUN_FILES = [CHECKPOINTS_DIR, LOG_FILE, DATASET_FILE, ADAPTER_CONFIG, ADAPTER_WEIGHTS];

export function holdsRun(dir: string): boolean {
  return RUN_FILES.some((name) => fs.existsSync(path.join(dir, name)));
}

/** Moves a folder aside under a hidden sibling name, then deletes it. */
export function removeRunFolder(dir: string): void {
  const aside = path.join(path.dirname(dir), `.${path.basename(dir)}.removing-${process.pid}-${Date.now()}`);
  fs.renameSync(dir, aside);
  fs.rmSync(aside, { recursive: true, force: true });
}

interface FolderAsk {
  /** The folder of the run a resume continues. */
  resumeRoot?: string;
  overwrite?: boolean;
}

/**
 * Refuses an output folder that is a file, or that holds another run when neither continuing
 * it nor overwriting was asked for. Changes nothing.
 */
export function checkOutFolder(outDir: string, ask: FolderAsk): void {
  if (fs.existsSync(outDir) && !fs.statSync(outDir).isDirectory()) throw new UserError(`${outDir} is a file, not a folder for the run`);
  const continuing = ask.resumeRoot !== undefined && path.resolve(ask.resumeRoot) === path.resolve(outDir);
  if (continuing && ask.overwrite) throw new UserError(`--overwrite would remove the run in ${outDir} that --resume continues; use one or the other`);
  if (!continuing && !ask.overwrite && holdsRun(outDir)) {
    throw new UserError(`${outDir} already holds a training run: continue it with --resume ${outDir}, or start over with --overwrite (the old run is removed)`);
  }
}

/** Makes `outDir` ready once the run starts: checks it again, removes an old run on overwrite. */
export function prepareOutFolder(outDir: string, ask: FolderAsk): void {
  checkOutFolder(outDir, ask);
  const continuing = ask.resumeRoot !== undefined && path.resolve(ask.resumeRoot) === path.resolve(outDir);
  if (!continuing && ask.overwrite && holdsRun(outDir)) removeRunFolder(outDir);
  fs.mkdirSync(outDir, { recursive: true });
}

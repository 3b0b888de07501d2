/**
 * Everything an on-policy run needs before its first step, read and checked without writing
 * anything (docs/design.md §On-policy training): the options resolved (output folder, model,
 * the run a resume continues), the settings, the contexts, the weights and optimizer state
 * (new, or the checkpoint's); then, once the run is known to start, the output folder claimed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { EPISODES_FILE } from '../../src-shared/rollout.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import { methodRecord } from '../../src-shared/training-methods.js';
import { SurfaceError, UserError } from '../../src-shared/types.js';
import type { Checkpoint, ModelConfig } from '../model/hf-checkpoint.js';
import type { ChatTokenizer } from '../model/tokenizer.js';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import { initLora, loraSpecs } from '../train/lora.js';
import { loadCheckpoint, resumedProgress, type RunProgress } from '../train/run-checkpoint.js';
import { checkOutFolder, prepareOutFolder } from '../train/run-folder.js';
import { checkBounds, loraFrom } from '../train/run-settings.js';
import { LOG_FILE, type TrainerLog } from '../train/trainer-log.js';
import { emptyOptimizerState, resumePoint, sha256 } from '../train/trainer.js';
import { zeroValueHead } from '../train/value-head.js';
import { CONTEXTS_FILE, contextsText, readContextLines, sampleContextLines, taskContextLines, type ContextLine } from './contexts.js';
import {
  checkOptionsSignal, DEFAULT_ON_POLICY_STEPS, isOnPolicySettings, onPolicySettingsFrom, resumedOnPolicySettings, type OnPolicyTrainSettings, type OnPolicyTrainerOptions,
} from './options.js';

/** Options with the output folder resolved and the model known (given, or the resumed run's). */
export type ResolvedOptions = OnPolicyTrainerOptions & { outDir: string; modelDir: string };

export interface Prepared extends RunProgress {
  settings: OnPolicyTrainSettings;
  contexts: ContextLine[];
  /** Samples left out as contexts, by reason. */
  skipped: Record<string, number>;
  /** contexts.jsonl as the run keeps it, and its sha256 (saved in every checkpoint). */
  contextsText: string;
  contextsSha: string;
}

/** The output folder and model of a run; a resume's changes are checked before any work starts. */
export function resolveOptions(options: OnPolicyTrainerOptions): ResolvedOptions {
  // Every number within its bounds before anything is read or written (src-shared/training.ts TRAIN_BOUNDS).
  checkBounds(options);
  checkBounds(options.onPolicy);
  if (!options.outDir && !options.resume) throw new UserError('a new run needs an output folder (--out)');
  const resumed = options.resume ? resumePoint(options.resume) : undefined;
  if (resumed && !isOnPolicySettings(resumed.settings)) {
    throw new UserError(`${resumed.root} holds an offline run, not an on-policy one: resume it without --on-policy`);
  }
  if (resumed) resumedOnPolicySettings(resumed.settings as OnPolicyTrainSettings, options);
  else checkOptionsSignal(options.method ?? TRAIN_DEFAULTS.method, options.onPolicy);
  const modelDir = options.modelDir ?? resumed?.settings.modelDir;
  if (!modelDir) throw new UserError('a new run needs a model folder (--model)');
  const outDir = path.resolve(options.outDir ?? resumed!.root);
  checkOutFolder(outDir, { resumeRoot: resumed?.root, overwrite: options.overwrite });
  return { ...options, outDir, modelDir };
}

/** The contexts of a new run: the task file's, or the database samples' that give a signal. */
function newContexts(o: ResolvedOptions, settings: OnPolicyTrainSettings, tokenizer: ChatTokenizer): { lines: ContextLine[]; skipped: Record<string, number> } {
  const s = settings.onPolicy;
  if (s.taskFile) return { lines: taskContextLines(s.taskFile), skipped: {} };
  if (!o.samples) throw new SurfaceError('nothing to train on: give --tasks FILE or a database with samples', 'Nothing to train on: give a Task file, or import chats with samples.');
  const got = sampleContextLines(o.samples, settings.method, s.judge !== null, tokenizer, settings.maxLength);
  if (got.lines.length === 0) {
    const why = Object.entries(got.skipped).map(([k, n]) => `${n} × ${k}`).join(', ');
    const left = why ? ` (left out: ${why})` : '';
    throw new SurfaceError(
      `nothing to train on-policy with method ${settings.method}: the database gives no context${left}; add hints, a replay judge (--judge-backend) or --tasks FILE`,
      `Nothing to train on-policy with ${methodRecord(settings.method).label}: the database gives no context${left}. Add hints to samples, label the replies captured from this model, or give a Task file.`,
    );
  }
  return got;
}

function prepareNew(o: ResolvedOptions, model: ModelConfig, tokenizer: ChatTokenizer): Prepared {
  const { lora, initial } = loraFrom(o, model);
  const settings = onPolicySettingsFrom(o, lora, model);
  const { lines, skipped } = newContexts(o, settings, tokenizer);
  const text = contextsText(lines);
  const weights = initial ?? initLora(loraSpecs(model, lora.targets), lora.r, settings.seed);
  const valueHead = settings.ppo.advantage === 'gae' ? zeroValueHead(model.hiddenSize) : undefined;
  return {
    settings, contexts: lines, skipped, weights, valueHead,
    optimizer: emptyOptimizerState(valueHead ? new Map([...weights, ...valueHead]) : weights, settings.optimizer.kind),
    startStep: 0, totalSteps: o.steps ?? DEFAULT_ON_POLICY_STEPS, elapsedBefore: 0, contextsText: text, contextsSha: sha256(text),
  };
}

function prepareResume(o: ResolvedOptions & { resume: string }, model: ModelConfig): Prepared {
  const saved = loadCheckpoint<OnPolicyTrainSettings>(o.resume, model);
  const settings = resumedOnPolicySettings(saved.state.settings, o);
  const root = path.resolve(saved.dir, '..', '..');
  const file = path.join(root, CONTEXTS_FILE);
  const lines = readContextLines(file);
  const text = fs.readFileSync(file, 'utf8');
  if (sha256(text) !== saved.state.datasetSha256) throw new UserError(`${file} changed since the checkpoint was written; cannot resume the run as it was`);
  return {
    ...resumedProgress(saved, root, o.steps, settings.ppo.advantage),
    settings, contexts: lines, skipped: {}, contextsText: text, contextsSha: saved.state.datasetSha256,
  };
}

export function prepare(o: ResolvedOptions, checkpoint: Checkpoint, tokenizer: ChatTokenizer): Prepared {
  return o.resume ? prepareResume({ ...o, resume: o.resume }, checkpoint.config) : prepareNew(o, checkpoint.config, tokenizer);
}

/**
 * Takes the output folder once the run is known to start (removing an old run there on
 * overwrite), writes the contexts, and starts the log (a resume cuts it back to its
 * checkpoint). A new run starts a new episodes file; a resume into another folder takes the
 * old folder's episodes along, so the interrupted step's finished episodes are still reused.
 */
export function claimOutFolder(o: ResolvedOptions, p: Prepared, log: TrainerLog): void {
  prepareOutFolder(o.outDir, { resumeRoot: p.resumedIn, overwrite: o.overwrite });
  const episodes = path.join(o.outDir, EPISODES_FILE);
  if (p.resumedIn === o.outDir) {
    log.truncateTo(p.startStep);
    return;
  }
  writeFileAtomicSync(path.join(o.outDir, CONTEXTS_FILE), Buffer.from(p.contextsText, 'utf8'), PRIVATE_FILE_MODE);
  if (p.resumedIn) {
    const from = path.join(p.resumedIn, EPISODES_FILE);
    if (fs.existsSync(from)) fs.copyFileSync(from, episodes);
    else fs.rmSync(episodes, { force: true });
    log.truncateTo(p.startStep, path.join(p.resumedIn, LOG_FILE));
    return;
  }
  fs.rmSync(episodes, { force: true });
  log.reset();
}

/** Where the contexts of the run `--resume dir` continues come from, or null when it is not an on-policy run (or none). */
export function onPolicyRunSource(dir: string): 'tasks' | 'database' | null {
  try {
    const { settings } = resumePoint(dir);
    return isOnPolicySettings(settings) ? settings.onPolicy.source : null;
  } catch {
    return null;
  }
}

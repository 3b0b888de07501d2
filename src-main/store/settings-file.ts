// User settings (judge backends, default model, live capture), kept as JSON beside the
// database under its name (`<db>.settings.json`, ./db-companions.ts), so each database
// carries its own setup: turning capture on for one never turns it on for its neighbours.
// Written atomically (temporary file, then rename), readable by the owner only (0600). The
// OpenAI-compatible API key is stored there in plain text, like any local tool's config file,
// and never sent back to the UI.
import fs from 'node:fs';
import path from 'node:path';
import type { CallInput, JudgeBackend, Settings, TrainMethod } from '../../src-shared/contract.js';
import { JUDGE_BACKENDS, TRAIN_METHODS } from '../../src-shared/contract.js';
import { DEFAULT_COMPOSITE_THRESHOLDS, thresholdProblem, type CompositeThresholds } from '../../src-shared/composite.js';
import { UserError } from '../../src-shared/types.js';
import { PRECISIONS, QUANTIZE_CHOICES, type Precision, type Quantize } from '../../src-shared/training.js';
import { CAPTURE_SETTING_DEFAULTS, type CaptureSettingFields } from '../../src-shared/capture-defaults.js';
import { adoptFolderFile, folderFilePath, FOLDER_SETTINGS_FILE, otherDatabasesBeside, PRIVATE_FILE_MODE } from './db-companions.js';

interface StoredSettings extends CaptureSettingFields {
  judgeBackend: JudgeBackend;
  judgeVotes: number;
  judgeHints: boolean;
  localModelDir: string;
  openaiBaseUrl: string;
  openaiModel: string;
  openaiApiKey: string;
  /** The OpenAI-compatible judge model's context in tokens; 0: unknown (learnt from its first context-length error). */
  openaiContextTokens: number;
  /** The composite reward mode of LLM judges and its thresholds (docs/design.md §Composite score). */
  judgeComposite: boolean;
  compositePos: number;
  compositeNeg: number;
  defaultModelDir: string;
  /** Folders the model catalog also looks in (`hindsight models --add`, src-main/model/model-catalog.ts). */
  modelFolders: string[];
}

export function settingsPathFor(dbPath: string): string {
  return `${path.resolve(dbPath)}.settings.json`;
}

export class SettingsStore {
  private stored: StoredSettings;

  constructor(
    readonly filePath: string,
    demoModelDir: string,
  ) {
    const defaults: StoredSettings = {
      judgeBackend: 'heuristic',
      judgeVotes: 3,
      judgeHints: true,
      localModelDir: demoModelDir,
      openaiBaseUrl: 'http://127.0.0.1:11434/v1',
      openaiModel: '',
      openaiApiKey: '',
      openaiContextTokens: 0,
      judgeComposite: false,
      compositePos: DEFAULT_COMPOSITE_THRESHOLDS.pos,
      compositeNeg: DEFAULT_COMPOSITE_THRESHOLDS.neg,
      defaultModelDir: demoModelDir,
      modelFolders: [],
      ...CAPTURE_SETTING_DEFAULTS,
    };
    this.stored = { ...defaults, ...this.readFile(defaults) };
  }

  /**
   * The settings of the database at `dbPath`. A folder-level `settings.json` from an earlier
   * version becomes this database's when no other database sits in its folder; beside
   * several databases nobody can tell whose it was, so it stays where it is.
   */
  static forDatabase(dbPath: string, demoModelDir: string): SettingsStore {
    const file = settingsPathFor(dbPath);
    adoptFolderFile(folderFilePath(dbPath, FOLDER_SETTINGS_FILE), file, () => otherDatabasesBeside(dbPath).length === 0);
    return new SettingsStore(file, demoModelDir);
  }

  /** Reads the file, keeping only well-typed known keys: a hand-edited mistake falls back to the default. */
  private readFile(defaults: StoredSettings): Partial<StoredSettings> {
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(this.filePath, 'utf8'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        process.stderr.write(`hindsight: ignoring unreadable settings file ${this.filePath}: ${(err as Error).message}\n`);
      }
      return {};
    }
    if (typeof raw !== 'object' || raw === null) return {};
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(raw)) {
      if (key in defaults && typeof value === typeof defaults[key as keyof StoredSettings]) out[key] = value;
    }
    if (out.judgeBackend !== undefined && !JUDGE_BACKENDS.includes(out.judgeBackend as JudgeBackend)) delete out.judgeBackend;
    if (out.captureTrainMethod !== undefined && !TRAIN_METHODS.includes(out.captureTrainMethod as TrainMethod)) delete out.captureTrainMethod;
    if (out.captureTrainQuantize !== undefined && !QUANTIZE_CHOICES.includes(out.captureTrainQuantize as Quantize)) delete out.captureTrainQuantize;
    // Null (the device's default) or a precision: the type check above reads null as an object.
    const precision = (raw as Record<string, unknown>).captureTrainPrecision;
    if (precision === null || PRECISIONS.includes(precision as Precision)) out.captureTrainPrecision = precision;
    else delete out.captureTrainPrecision;
    if (thresholdProblem({ pos: (out.compositePos ?? defaults.compositePos) as number, neg: (out.compositeNeg ?? defaults.compositeNeg) as number })) {
      delete out.compositePos;
      delete out.compositeNeg;
    }
    if (out.modelFolders !== undefined && !(Array.isArray(out.modelFolders) && out.modelFolders.every((f) => typeof f === 'string'))) delete out.modelFolders;
    if (out.openaiContextTokens !== undefined && !(Number.isInteger(out.openaiContextTokens) && (out.openaiContextTokens as number) >= 0)) delete out.openaiContextTokens;
    if (out.captureTrainEvery !== undefined && !(Number.isInteger(out.captureTrainEvery) && (out.captureTrainEvery as number) >= 1)) delete out.captureTrainEvery;
    return out as Partial<StoredSettings>;
  }

  get raw(): Readonly<StoredSettings> {
    return this.stored;
  }

  /** The thresholds LLM judges score with when the composite mode is on, else undefined. */
  compositeThresholds(): CompositeThresholds | undefined {
    const s = this.stored;
    return s.judgeComposite ? { pos: s.compositePos, neg: s.compositeNeg } : undefined;
  }

  view(): Settings {
    const s = this.stored;
    return {
      judge: {
        backend: s.judgeBackend,
        votes: s.judgeVotes,
        hints: s.judgeHints,
        localModelDir: s.localModelDir,
        openaiBaseUrl: s.openaiBaseUrl,
        openaiModel: s.openaiModel,
        openaiApiKeySet: s.openaiApiKey.length > 0,
        openaiContextTokens: s.openaiContextTokens,
        composite: s.judgeComposite,
        compositePos: s.compositePos,
        compositeNeg: s.compositeNeg,
      },
      defaultModelDir: s.defaultModelDir,
      capture: {
        enabled: s.captureEnabled,
        upstreamBaseUrl: s.captureUpstreamUrl,
        upstreamModel: s.captureUpstreamModel,
        upstreamApiKeySet: s.captureUpstreamApiKey.length > 0,
        autoJudge: s.captureAutoJudge,
        autoTrain: s.captureAutoTrain,
        trainEvery: s.captureTrainEvery,
        trainSteps: s.captureTrainSteps,
        trainMethod: s.captureTrainMethod,
        trainQuantize: s.captureTrainQuantize,
        trainPrecision: s.captureTrainPrecision,
      },
    };
  }

  update(patch: CallInput<'updateSettings'>): Settings {
    const next = { ...this.stored };
    for (const [key, value] of Object.entries(patch)) {
      if (value !== undefined) (next as Record<string, unknown>)[key] = value;
    }
    const problem = thresholdProblem({ pos: next.compositePos, neg: next.compositeNeg });
    if (problem) throw new UserError(`Composite score: ${problem}.`);
    this.save(next);
    return this.view();
  }

  /** Replaces the folders the model catalog looks in besides the tools' own. */
  setModelFolders(folders: string[]): void {
    this.save({ ...this.stored, modelFolders: [...folders] });
  }

  private save(next: StoredSettings): void {
    fs.mkdirSync(path.dirname(this.filePath), { recursive: true });
    const tmp = `${this.filePath}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(next, null, 2) + '\n', { mode: PRIVATE_FILE_MODE });
    fs.renameSync(tmp, this.filePath);
    this.stored = next;
  }
}

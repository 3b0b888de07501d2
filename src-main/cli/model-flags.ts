// The flags of every command that runs a model (generate, eval, judge, rollout, score, train):
// --model (a path, or a name `hindsight models` lists), --device, --precision and --quantize,
// their help, and their parsers. One place, so that each command spells and checks them the
// same way.
import path from 'node:path';
import type { Device } from '../model/ort-session.js';
import { DEFAULT_JUDGE_URL, type LlmJudgeSpec } from '../judge/backends.js';
import { PRECISIONS, TRAIN_DEVICES, type Precision } from '../../src-shared/training.js';
import { parseQuantize, QUANTIZE_CHOICES, type Quantize } from '../model/quantize.js';
import { resolveModelName } from '../model/model-name.js';
import type { LoadQuantize } from '../model/inference-fit.js';
import { SettingsStore, settingsPathFor } from '../store/settings-file.js';
import { defaultDbPath, intFlag, UsageError } from './args.js';

/** What each device needs, for the `--device` help (docs/design.md §Devices). */
export const DEVICE_HELP = 'where the model runs (cuda: after npm run setup:gpu; webgpu: a GPU with a Vulkan, Direct3D 12 or Metal driver)';

/** `--precision`'s help: what it changes and each device's default (docs/design.md §Precision). */
export const PRECISION_HELP = "the frozen base's projections in fp16 (faster on CUDA; LoRA, the loss and the optimizer stay fp32) or fp32";

/** `--device` and `--precision`, shared by the commands that run a model. */
export const DEVICE_OPTION = {
  device: { type: 'string', default: 'cpu', value: TRAIN_DEVICES.join('|'), help: DEVICE_HELP },
  precision: { type: 'string', value: PRECISIONS.join('|'), help: PRECISION_HELP, otherwise: 'fp16 on CUDA, fp32 on the CPU and WebGPU' },
} as const;

/** `--precision`'s value; undefined (the device's default) when not given. */
export function precisionFlag(value: string | undefined): Precision | undefined {
  if (value === undefined) return undefined;
  if ((PRECISIONS as readonly string[]).includes(value)) return value as Precision;
  throw new UsageError(`--precision must be ${PRECISIONS.join(' or ')}, got '${value}'`);
}

/**
 * `--quantize` and `--ignore-memory`, shared by the commands that run a model for inference
 * (docs/design.md §Quantisation, §Memory for inference): auto, the default, is the most exact
 * form of the weights that fits the machine's memory (model/inference-fit.ts).
 */
export const QUANTIZE_OPTION = {
  quantize: { type: 'string', default: 'auto', value: ['auto', ...QUANTIZE_CHOICES].join('|'), help: 'weight-only quantised linear layers (int8, int4: faster, less exact); auto: fp32 where it fits the memory available, else int8, else int4' },
  'ignore-memory': { type: 'boolean', default: false, help: 'load the model even where its weights in that form do not fit the memory available' },
} as const;

/** A training run's `--quantize` (none, int8, int4: the frozen base's storage). */
export function quantizeFlag(value: string | undefined): Quantize {
  try {
    return parseQuantize(value);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** An inference command's `--quantize`: auto or one of the forms. */
export function loadQuantizeFlag(value: string | undefined): LoadQuantize {
  return value === undefined || value === 'auto' ? 'auto' : quantizeFlag(value);
}

/** `--device`'s value; the CPU when not given. */
export function deviceFlag(value: string | undefined): Device {
  if (value === undefined) return 'cpu';
  if ((TRAIN_DEVICES as readonly string[]).includes(value)) return value as Device;
  throw new UsageError(`--device must be ${TRAIN_DEVICES.join(', ')}, got '${value}'`);
}

/**
 * A model flag's value as a path: the value itself when it is a path, else the path of the
 * model `hindsight models` lists under that name (Ollama's `qwen3:0.6b`, LM Studio's
 * `publisher/repo/file.gguf`, the Hugging Face cache's `org/name`, or one in the folders added
 * to the database `db`'s settings, the app's by default). An unknown, ambiguous or unloadable
 * name is one line (model/model-name.ts).
 */
export function modelFlag(value: string, flag = '--model', db?: string): string {
  return resolveModelName(value, flag, { folders: addedFolders(db) });
}

/** The folders added with `hindsight models --add` to the database's settings (read only; none when unreadable). */
function addedFolders(db: string | undefined): string[] {
  try {
    return [...new SettingsStore(settingsPathFor(db ?? defaultDbPath()), '').raw.modelFolders];
  } catch {
    return [];
  }
}

/** `--judge-model`'s help, the same wherever an LLM judge is taken (eval, lessons, train --on-policy). */
export const JUDGE_MODEL_HELP = "the judge model: a model folder, .gguf file or name 'hindsight models' lists (local), or the name the server serves (openai)";

/** The values llmJudgeFlags reads: the --judge-* flags a command has (eval has no --judge-context) and --db. */
type JudgeFlagValues = Record<string, string | boolean | string[] | undefined>;

/**
 * The LLM judge the --judge-* flags name, for `backend` (local or openai): a local judge's
 * --judge-model is a path or a name `hindsight models` lists (resolved as --model is, with the
 * folders added to --db's settings), an OpenAI-compatible judge's is the name its server serves.
 * The one reading of these flags behind eval, lessons and train --on-policy.
 */
export function llmJudgeFlags(backend: 'local' | 'openai', v: JudgeFlagValues, device: Device): LlmJudgeSpec {
  const str = (k: string) => v[k] as string | undefined;
  const model = str('judge-model');
  if (!model) throw new UsageError(`--judge-backend ${backend} needs --judge-model ${backend === 'local' ? 'DIR (the model folder that judges)' : 'NAME (the model name the server serves)'}`);
  if (backend === 'local') return { backend, modelDir: path.resolve(modelFlag(model, '--judge-model', str('db'))), device };
  const context = str('judge-context') === undefined ? undefined : intFlag('judge-context', str('judge-context'), 0, 16);
  return { backend, model, baseUrl: str('judge-url') ?? DEFAULT_JUDGE_URL, apiKey: str('judge-api-key') ?? process.env.HINDSIGHT_JUDGE_API_KEY, contextTokens: context };
}

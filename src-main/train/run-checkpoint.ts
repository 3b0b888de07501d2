/**
 * Trainer checkpoints: everything a run needs to continue bit-for-bit.
 *
 *   <out>/checkpoints/step-000012/adapter_model.safetensors   LoRA A/B (a PEFT adapter folder)
 *                                 adapter_config.json
 *                                 value_head.safetensors      the value head (`gae` runs only)
 *                                 optimizer.safetensors       AdamW moments m.<key>, v.<key> (fp32),
 *                                                             the value head's keys included
 *                                 trainer_state.json          steps done, optimizer step, the run's
 *                                                             settings, the dataset's sha256
 *   <out>/checkpoints/latest.json                             {"step":12,"dir":"step-000012"}
 *
 * The data position needs no RNG state: step k's rows are a pure function of (seed, k)
 * (batches.ts rowsForStep), and the rows themselves are in <out>/dataset.jsonl.
 *
 * Atomicity: a checkpoint folder is complete (every file fsynced) before latest.json is
 * atomically replaced to point at it; only then are older folders removed. A run killed at
 * any moment leaves latest.json naming a complete checkpoint.
 */
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import type { ModelConfig } from '../model/hf-checkpoint.js';
import { readSafetensorsHeader, readTensorBytes, toFloat32 } from '../model/safetensors.js';
import { f32Tensors, fsyncDir, writeJsonAtomic, writeSafetensorsAtomic } from './files.js';
import { loraShapes } from './lora.js';
import { readAdapter, writeAdapter } from './peft.js';
import type { LoraConfig, LoraTensorSpec, LoraWeights, OptimizerState } from './training-step.js';
import { readValueHead, valueHeadShapes, VALUE_HEAD_WEIGHT, writeValueHead, type ValueHead } from './value-head.js';
import { LOG_FILE, readLog } from './trainer-log.js';

export const CHECKPOINTS_DIR = 'checkpoints';
const LATEST = 'latest.json';
const OPTIMIZER_FILE = 'optimizer.safetensors';
const STATE_FILE = 'trainer_state.json';

export interface TrainerState<Settings = unknown> {
  format: 1;
  /** Trainer steps completed. */
  step: number;
  totalSteps: number;
  settings: Settings;
  datasetSha256: string;
  savedAt: string;
}

export interface SavedCheckpoint<Settings = unknown> {
  dir: string;
  state: TrainerState<Settings>;
  lora: LoraConfig;
  weights: LoraWeights;
  optimizer: OptimizerState;
  /** The value head of a `gae` run; undefined for the other estimators. */
  valueHead?: ValueHead;
}

export function checkpointsRoot(outDir: string): string {
  return path.join(outDir, CHECKPOINTS_DIR);
}

export function saveCheckpoint<S>(outDir: string, data: {
  state: TrainerState<S>; lora: LoraConfig; specs: readonly LoraTensorSpec[]; weights: LoraWeights; optimizer: OptimizerState; baseModel: string;
  /** The base's config (a fused-projection model's adapter is written fused: ./fused-adapter.ts). */
  model?: ModelConfig;
  valueHead?: ValueHead;
}): string {
  const root = checkpointsRoot(outDir);
  const name = `step-${String(data.state.step).padStart(6, '0')}`;
  const dir = path.join(root, name);
  if (fs.existsSync(path.join(root, LATEST)) && findCheckpoint(outDir) === dir) {
    throw new Error(`checkpoint ${dir} is the current one; it is never rewritten in place`);
  }
  fs.rmSync(dir, { recursive: true, force: true }); // a leftover from a run killed mid-save
  fs.mkdirSync(dir, { recursive: true });
  writeAdapter(dir, { lora: data.lora, specs: data.specs, weights: data.weights, baseModel: data.baseModel, model: data.model });
  if (data.valueHead) writeValueHead(dir, data.valueHead);
  const shapes = withValueHeadShapes(loraShapes(data.specs, data.lora.r), data.valueHead?.get(VALUE_HEAD_WEIGHT)!.length);
  const tensors = { ...f32Tensors(data.optimizer.m, shapes, 'm.'), ...f32Tensors(data.optimizer.v, shapes, 'v.') };
  writeSafetensorsAtomic(path.join(dir, OPTIMIZER_FILE), tensors, { optimizer_step: String(data.optimizer.step) });
  writeJsonAtomic(path.join(dir, STATE_FILE), data.state);
  fsyncDir(root);
  writeJsonAtomic(path.join(root, LATEST), { step: data.state.step, dir: name });
  for (const other of fs.readdirSync(root)) {
    if (other !== name && other.startsWith('step-')) fs.rmSync(path.join(root, other), { recursive: true, force: true });
  }
  return dir;
}

/** The checkpoint folder `latest.json` names under an output folder (or the folder itself if it is one). */
export function findCheckpoint(dir: string): string {
  if (fs.existsSync(path.join(dir, STATE_FILE))) return dir;
  const root = fs.existsSync(path.join(dir, LATEST)) ? dir : checkpointsRoot(dir);
  const latest = path.join(root, LATEST);
  if (!fs.existsSync(latest)) throw new UserError(`${dir}: no checkpoint to resume from (no ${path.join(CHECKPOINTS_DIR, LATEST)})`);
  let pointer: { dir?: unknown };
  try {
    pointer = JSON.parse(fs.readFileSync(latest, 'utf8'));
  } catch (err) {
    throw new UserError(`${latest}: invalid JSON (${(err as Error).message})`);
  }
  if (typeof pointer.dir !== 'string') throw new UserError(`${latest}: has no "dir"`);
  const found = path.join(root, pointer.dir);
  if (!fs.existsSync(path.join(found, STATE_FILE))) throw new UserError(`${latest}: names ${found}, which holds no ${STATE_FILE}`);
  return found;
}

/** The trainer state of the checkpoint `dir` names (see findCheckpoint), without its tensors. */
export function readCheckpointState<S>(dir: string): { dir: string; state: TrainerState<S> } {
  const found = findCheckpoint(dir);
  const stateFile = path.join(found, STATE_FILE);
  let state: TrainerState<S>;
  try {
    state = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
  } catch (err) {
    throw new UserError(`${stateFile}: invalid JSON (${(err as Error).message})`);
  }
  if (state?.format !== 1 || !Number.isInteger(state.step)) throw new UserError(`${stateFile}: not a Hindsight trainer state (format ${state?.format})`);
  return { dir: found, state };
}

export function loadCheckpoint<S>(dir: string, model: ModelConfig): SavedCheckpoint<S> {
  const { dir: found, state } = readCheckpointState<S>(dir);
  const adapter = readAdapter(found, model);
  const valueHead = readValueHead(found, model.hiddenSize) ?? undefined;
  const shapes = withValueHeadShapes(loraShapes(adapter.specs, adapter.lora.r), valueHead && model.hiddenSize);
  const optFile = path.join(found, OPTIMIZER_FILE);
  const { tensors, metadata } = readSafetensorsHeader(optFile);
  const m = new Map<string, Float32Array>();
  const v = new Map<string, Float32Array>();
  for (const e of tensors) {
    const [which, ...rest] = e.name.split('.');
    const key = rest.join('.');
    const shape = shapes.get(key);
    if ((which !== 'm' && which !== 'v') || !shape || e.shape.join() !== shape.join()) {
      throw new UserError(`${optFile}: unexpected tensor '${e.name}' [${e.shape}]`);
    }
    (which === 'm' ? m : v).set(key, toFloat32(readTensorBytes(e), e.dtype, `${optFile}: ${e.name}`).slice());
  }
  const optimizerStep = Number(metadata.optimizer_step);
  if (!Number.isInteger(optimizerStep)) throw new UserError(`${optFile}: missing optimizer_step metadata`);
  return { dir: found, state, lora: adapter.lora, weights: adapter.weights, optimizer: { step: optimizerStep, m, v }, valueHead };
}

/** The LoRA shapes, and the value head's when a run has one (of this hidden size). */
function withValueHeadShapes(shapes: Map<string, number[]>, hiddenSize: number | undefined): Map<string, number[]> {
  return hiddenSize === undefined ? shapes : new Map([...shapes, ...valueHeadShapes(hiddenSize)]);
}

/** Where a run stands when it starts: a new run at step 0, or a checkpoint's run continued. */
export interface RunProgress {
  weights: LoraWeights;
  optimizer: OptimizerState;
  /** The value head of a `gae` run. */
  valueHead?: ValueHead;
  startStep: number;
  totalSteps: number;
  /** Seconds trained before this process, as the run's log last recorded them. */
  elapsedBefore: number;
  /** The output folder of the run a resume continues (its checkpoint is already on disk there). */
  resumedIn?: string;
}

/**
 * A checkpoint's progress, once checked against what the resume asks for: at least the steps
 * it has done (`steps`, default the run's own total), and a value head exactly when the
 * estimator is `gae`. `root` is the run's folder (its log gives the time trained so far).
 * A checkpoint with all its steps done (a kill between the last checkpoint and the export)
 * resumes too: the run loop takes no step and finishes the run (adapter, merge, evaluation).
 */
export function resumedProgress(saved: SavedCheckpoint, root: string, steps: number | undefined, advantage: string): RunProgress {
  const totalSteps = steps ?? saved.state.totalSteps;
  if (totalSteps < saved.state.step) throw new UserError(`the checkpoint in ${saved.dir} has done ${saved.state.step} steps already; ask for more with --steps (now ${totalSteps})`);
  const gae = advantage === 'gae';
  if (gae !== (saved.valueHead !== undefined)) throw new UserError(`${saved.dir}: a ${advantage} run ${gae ? 'needs the value head it trains, which the checkpoint lacks' : 'has no value head, but the checkpoint holds one'}`);
  const kept = readLog(path.join(root, LOG_FILE)).filter((l) => l.step <= saved.state.step);
  return {
    weights: saved.weights, optimizer: saved.optimizer, valueHead: saved.valueHead,
    startStep: saved.state.step, totalSteps, elapsedBefore: kept.at(-1)?.elapsed_s ?? 0, resumedIn: root,
  };
}

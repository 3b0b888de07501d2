// `hindsight handoff --to trl` (docs/design.md §Hand-off): a folder a GPU cluster runs as it is.
//
//   data/*.jsonl          every dataset in TRL's fields (src-main/export/trl-datasets.ts),
//                         without the held-out sessions unless asked (--include-heldout)
//   heldout/*.jsonl       the same datasets of the held-out sessions, for evaluation only
//   train.py              the chosen trainer, LoRA mirroring Hindsight's (export/trl-script.ts)
//   reward.py, judge_prompts.json   the GRPO reward: Hindsight's reward prompt over HTTP
//   accelerate/*.yaml     one GPU, N GPUs with FSDP, N GPUs with DeepSpeed ZeRO-3
//   requirements.txt, README.md, handoff.json (what was written, for the record)
//
// The judge prompts are rendered from src-main/judge/prompts.ts with placeholders, so the
// cluster's judge reads exactly the words the local one does.
import fs from 'node:fs';
import path from 'node:path';
import { UserError } from '../../src-shared/types.js';
import { TRAIN_DEFAULTS } from '../../src-shared/training.js';
import type { HeldOutHandoff, TrlHandoffOptions, TrlHandoffResult } from '../../src-shared/handoff.js';
import { removeTrlDatasets, writeTrlDatasets } from '../export/trl-datasets.js';
import { fsdpConfig, requirementsTxt, singleGpuConfig, trlReadme, zero3Config } from '../export/trl-configs.js';
import { trainScript } from '../export/trl-script.js';
import { rewardScript } from '../export/trl-reward-script.js';
import { MAX_SECTION_CHARS, REWARD_PROMPT_VERSION, rewardPrompt } from '../judge/prompts.js';
import type { Store } from '../store/database.js';
import { writeFileAtomicSync } from '../store/atomic-file.js';
import { PEFT_MODULE_NAMES } from '../train/lora.js';

const REPLY = '<<<REPLY>>>';
const NEXT_STATE = '<<<NEXT_STATE>>>';
export const DEFAULT_JUDGE_URL = 'http://127.0.0.1:8000/v1';

/** The reward prompt with placeholders where the reply and the next state go, for both next-state roles. */
export function judgePromptsJson(): object {
  const render = (role: 'user' | 'tool') =>
    rewardPrompt({ sessionId: '', responseTurn: 0, context: [], response: REPLY, responseMessage: { role: 'assistant', content: REPLY }, nextState: { role, text: NEXT_STATE } });
  const [system, user] = render('user');
  return {
    version: REWARD_PROMPT_VERSION,
    max_section_chars: MAX_SECTION_CHARS,
    placeholders: { reply: REPLY, next_state: NEXT_STATE },
    reward: { system: system!.content, user_templates: { user: user!.content, tool: render('tool')[1]!.content } },
  };
}

function checkInitAdapter(dir: string | undefined): string | null {
  if (!dir) return null;
  const resolved = path.resolve(dir);
  if (!fs.existsSync(path.join(resolved, 'adapter_config.json'))) throw new UserError(`--init-adapter ${dir}: not a PEFT adapter folder (no adapter_config.json)`);
  return resolved;
}

function write(outDir: string, file: string, text: string, written: string[]): void {
  fs.mkdirSync(path.dirname(path.join(outDir, file)), { recursive: true });
  writeFileAtomicSync(path.join(outDir, file), Buffer.from(text, 'utf8'));
  written.push(file);
}

/** The database's held-out sessions (docs/design.md §Evaluation): their ids, and how many have samples. */
export interface HeldOutSessions {
  ids: ReadonlySet<string>;
  sessions: number;
  samples: number;
}

/**
 * data/ gets what the cluster trains on; held-out sessions go to heldout/ instead (never
 * trained on, as at home), or into data/ with includeHeldOut, when no heldout/ is left behind.
 */
function writeDatasets(store: Store, outDir: string, heldOut: HeldOutSessions, include: boolean) {
  const counts: HeldOutHandoff = { sessions: heldOut.sessions, samples: heldOut.samples, included: include };
  if (include) {
    removeTrlDatasets(outDir, 'heldout'); // an earlier hand-off's, which now would overlap the training data
    return { datasets: writeTrlDatasets(store, outDir, 'data', () => true), heldOut: { ...counts, datasets: [] } };
  }
  const datasets = writeTrlDatasets(store, outDir, 'data', (id) => !heldOut.ids.has(id));
  return { datasets, heldOut: { ...counts, datasets: writeTrlDatasets(store, outDir, 'heldout', (id) => heldOut.ids.has(id)) } };
}

export function writeTrlHandoff(store: Store, options: TrlHandoffOptions, heldOutSessions: HeldOutSessions): TrlHandoffResult {
  if (!options.baseModel.trim()) throw new UserError('--base-model is required: a Hugging Face model id or a path on the cluster');
  if (!Number.isInteger(options.gpus) || options.gpus < 1) throw new UserError(`--gpus must be a whole number ≥ 1, got ${options.gpus}`);
  const outDir = path.resolve(options.outDir);
  if (outDir === store.path || (fs.existsSync(outDir) && !fs.statSync(outDir).isDirectory())) throw new UserError(`${options.outDir}: not a folder`);
  const initAdapter = checkInitAdapter(options.initAdapter);
  const { datasets, heldOut } = writeDatasets(store, outDir, heldOutSessions, options.includeHeldOut === true);
  const lora = { r: TRAIN_DEFAULTS.loraR, alpha: TRAIN_DEFAULTS.loraAlpha, targets: TRAIN_DEFAULTS.targets.map((t) => PEFT_MODULE_NAMES[t]) };
  const written: string[] = [...datasets, ...heldOut.datasets].map((d) => d.file);
  const judgeUrl = options.judgeUrl?.trim() || DEFAULT_JUDGE_URL;
  const lossAgg = options.lossAgg ?? TRAIN_DEFAULTS.lossAgg, opdTopK = options.opdTopK ?? 0;
  write(outDir, 'train.py', trainScript({
    baseModel: options.baseModel, initAdapter, method: options.method, loraR: lora.r, loraAlpha: lora.alpha, loraDropout: TRAIN_DEFAULTS.loraDropout, loraTargets: lora.targets,
    lossAgg, opdTopK,
  }), written);
  write(outDir, 'reward.py', rewardScript(judgeUrl, options.judgeModel?.trim() || 'judge'), written);
  write(outDir, 'judge_prompts.json', JSON.stringify(judgePromptsJson(), null, 2) + '\n', written);
  write(outDir, 'accelerate/single_gpu.yaml', singleGpuConfig(), written);
  write(outDir, 'accelerate/fsdp.yaml', fsdpConfig(options.gpus), written);
  write(outDir, 'accelerate/zero3.yaml', zero3Config(options.gpus), written);
  write(outDir, 'requirements.txt', requirementsTxt(), written);
  write(outDir, 'README.md', trlReadme({ baseModel: options.baseModel, method: options.method, gpus: options.gpus, initAdapter, datasets, heldOut, lora, lossAgg, opdTopK }), written);
  const record = { to: 'trl', method: options.method, base_model: options.baseModel, init_adapter: initAdapter, gpus: options.gpus, lora, datasets, held_out: heldOut };
  write(outDir, 'handoff.json', JSON.stringify(record, null, 2) + '\n', written);
  return { outDir, method: options.method, datasets, files: written, heldOut };
}

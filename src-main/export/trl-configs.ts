// The non-Python files of a TRL hand-off (docs/design.md §Hand-off): accelerate configs for one
// GPU and for N GPUs (FSDP, DeepSpeed ZeRO-3), requirements.txt with the versions the files
// were written for, and the README with the exact commands.
import type { LossAgg } from '../../src-shared/training.js';
import type { HeldOutHandoff, TrlMethod } from '../../src-shared/handoff.js';

/** The package versions train.py and the configs were written against. */
export const TRL_REQUIREMENTS: readonly [string, string][] = [
  ['torch', '>=2.6'],
  ['transformers', '==5.24.0'],
  ['trl', '==1.16.0'],
  ['peft', '==0.21.2'],
  ['accelerate', '==1.15.0'],
  ['datasets', '==5.2.0'],
  ['deepspeed', '==0.19.8'],
];

export function requirementsTxt(): string {
  return ['# Written for these versions by `hindsight handoff --to trl`; torch: the CUDA build your cluster uses.', ...TRL_REQUIREMENTS.map(([name, v]) => `${name}${v}`)].join('\n') + '\n';
}

const COMMON = ['compute_environment: LOCAL_MACHINE', 'machine_rank: 0', 'num_machines: 1', 'mixed_precision: bf16', 'rdzv_backend: static', 'same_network: true', 'use_cpu: false'];

export function singleGpuConfig(): string {
  return ['# One GPU: accelerate launch --quiet --config_file accelerate/single_gpu.yaml train.py', "distributed_type: 'NO'", 'num_processes: 1', ...COMMON].join('\n') + '\n';
}

export function fsdpConfig(gpus: number): string {
  return [
    `# ${gpus} GPUs, parameters, gradients and optimizer state sharded (FSDP): accelerate launch --quiet --config_file accelerate/fsdp.yaml train.py`,
    'distributed_type: FSDP',
    `num_processes: ${gpus}`,
    ...COMMON,
    'fsdp_config:',
    '  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP',
    '  fsdp_backward_prefetch: BACKWARD_PRE',
    '  fsdp_cpu_ram_efficient_loading: true',
    '  fsdp_forward_prefetch: false',
    '  fsdp_offload_params: false',
    '  fsdp_sharding_strategy: FULL_SHARD',
    '  fsdp_state_dict_type: SHARDED_STATE_DICT',
    '  fsdp_sync_module_states: true',
    '  fsdp_use_orig_params: true # LoRA: frozen and trainable parameters share the shards',
  ].join('\n') + '\n';
}

export function zero3Config(gpus: number): string {
  return [
    `# ${gpus} GPUs with DeepSpeed ZeRO-3: accelerate launch --quiet --config_file accelerate/zero3.yaml train.py`,
    'distributed_type: DEEPSPEED',
    `num_processes: ${gpus}`,
    ...COMMON,
    'deepspeed_config:',
    '  zero_stage: 3',
    '  zero3_init_flag: true',
    '  zero3_save_16bit_model: true',
    '  offload_optimizer_device: none',
    '  offload_param_device: none',
    '  gradient_accumulation_steps: auto',
    '  gradient_clipping: auto',
  ].join('\n') + '\n';
}

export interface ReadmeFacts {
  baseModel: string;
  method: TrlMethod;
  gpus: number;
  initAdapter: string | null;
  datasets: { file: string; lines: number }[];
  heldOut: HeldOutHandoff & { datasets: { file: string; lines: number }[] };
  lora: { r: number; alpha: number; targets: string[] };
  lossAgg: LossAgg;
  opdTopK: number;
}

/** What the README says of Hindsight's --loss-agg and --opd-topk for this bundle's trainers. */
function lossSection(f: ReadmeFacts): string {
  const agg = f.lossAgg === 'sample-mean'
    ? 'each completion averaged over its tokens, then over the batch: `loss_type="grpo"`'
    : 'every token of the batch weighing the same: `loss_type="dapo"`';
  const topk = f.opdTopK > 0
    ? `SDFT distils the reverse KL over the top ${f.opdTopK} tokens and a tail bin (\`distillation_mode="topk_logits"\`, \`distillation_alpha=1.0\`, \`distillation_add_tail=True\`); TRL takes the student's top K where Hindsight and OpenClaw-RL take the teacher's.`
    : "SDFT keeps its own defaults (the student's top 100 tokens, `distillation_alpha=0.5`); `train.py --opd-topk K` asks for Hindsight's top-K reverse KL with a tail bin instead.";
  return `Loss aggregation (Hindsight's \`--loss-agg ${f.lossAgg}\`, \`train.py --loss-agg\`): GRPO has ${agg}. TRL has no such choice for
the others: SDFT always averages per completion (sample-mean), SFT over the batch's tokens (token-mean), and KTO and DPO score
whole sequences. ${topk}`;
}

const TRAINER: Record<TrlMethod, string> = {
  kto: 'KTOTrainer on data/kto.jsonl (prompt, completion, label): replies labelled good or bad',
  dpo: 'DPOTrainer on data/dpo.jsonl (prompt, chosen, rejected): regenerations and repairs as pairs',
  sft: 'SFTTrainer on data/sft.jsonl (messages): good replies and repairs, each row given as prompt and completion so that only the reply is learnt',
  sdft: 'SDFTTrainer (trl.experimental) on data/sdft.jsonl (prompt, privileged_context): the judge hints as teacher-only context',
  grpo: 'GRPOTrainer on data/grpo.jsonl (prompt plus the recorded next state), rewarded by reward.py asking a judge endpoint',
};

/** What the README says of the held-out sessions: where they went, and that training must not see them. */
function heldOutSection(h: ReadmeFacts['heldOut']): string {
  const what = `${h.sessions} held-out session${h.sessions === 1 ? '' : 's'}, ${h.samples} sample${h.samples === 1 ? '' : 's'}`;
  if (h.included) return `The ${what}, kept apart for evaluation at home, are in \`data/\` too (\`--include-heldout\`): evaluate elsewhere.`;
  return `The ${what}, are left out of \`data/\`: Hindsight never trains on them (they measure whether a fine-tune helped).
\`heldout/\` has their datasets in the same fields, to evaluate the adapter on; do not train on it.`;
}

export function trlReadme(f: ReadmeFacts): string {
  const data = [...f.datasets, ...f.heldOut.datasets].map((d) => `| \`${d.file}\` | ${d.lines} |`).join('\n');
  return `# Hindsight hand-off: TRL

Written by \`hindsight handoff --to trl\`. Base model: \`${f.baseModel}\`. Method: **${f.method}**: ${TRAINER[f.method]}.
LoRA as Hindsight trains it: r ${f.lora.r}, alpha ${f.lora.alpha}, targets ${f.lora.targets.join(', ')}, bf16, gradient checkpointing.${f.initAdapter ? `\nTraining continues from the adapter \`${f.initAdapter}\` (copy it to the cluster and keep that path, or pass \`--init-adapter\`).` : ''}

| dataset | lines |
| --- | --- |
${data}

${heldOutSection(f.heldOut)}

## On the cluster

\`\`\`sh
python -m venv .venv && . .venv/bin/activate
pip install -r requirements.txt
# one GPU
accelerate launch --quiet --config_file accelerate/single_gpu.yaml train.py
# ${f.gpus} GPUs: FSDP, or DeepSpeed ZeRO-3
accelerate launch --quiet --config_file accelerate/fsdp.yaml train.py
accelerate launch --quiet --config_file accelerate/zero3.yaml train.py
\`\`\`

\`train.py --method kto|dpo|sft|sdft|grpo\` switches trainer (every dataset is here); \`--epochs\`, \`--lr\`, \`--batch-size\`,
\`--grad-accum\`, \`--max-length\`, \`--max-steps\`, \`--output-dir\` change the rest. For another GPU count, edit \`num_processes\` in the config.

${lossSection(f)}
${f.method === 'grpo' ? `
GRPO asks a judge for every completion: set \`HINDSIGHT_JUDGE_URL\` (an OpenAI-compatible base URL such as
\`http://judge-host:8000/v1\`), \`HINDSIGHT_JUDGE_MODEL\` and, if needed, \`HINDSIGHT_JUDGE_API_KEY\`. The prompt is Hindsight's
reward prompt (\`judge_prompts.json\`); the recorded next state is shown as evidence of what the user wanted.
` : ''}
## Bringing the adapter back

The run writes a PEFT adapter (\`adapter_config.json\`, \`adapter_model.safetensors\`) to \`output/\`. Copy that folder back:

\`\`\`sh
hindsight score --model LOCAL_MODEL_DIR --adapter output --input rows.jsonl --out scored.jsonl
hindsight generate --model LOCAL_MODEL_DIR --adapter output --prompt "…"
hindsight serve --model LOCAL_MODEL_DIR --adapter output
hindsight train --model LOCAL_MODEL_DIR --init-adapter output --out next-adapter
\`\`\`

LOCAL_MODEL_DIR is the same base model as a local Hugging Face folder.
`;
}

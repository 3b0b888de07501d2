// The Python a TRL hand-off runs on the cluster (docs/design.md §Hand-off): train.py (the
// chosen TRL trainer with a PEFT LoRA mirroring Hindsight's adapter shape, bf16, gradient
// checkpointing); GRPO's reward.py is ./trl-reward-script.ts. Only the settings at the top of
// train.py vary between hand-offs; everything else is fixed text.
import type { TrlMethod } from '../../src-shared/handoff.js';
import { LOSS_AGGS, type LossAgg } from '../../src-shared/training.js';
import { TRL_METHODS } from '../../src-shared/handoff.js';
import { DATASET_FIELDS, DATASET_FILES } from './trl-datasets.js';
import { FUSED_PROJECTIONS, fusedModuleName } from '../model/fused-projections.js';
import { PEFT_MODULE_NAMES } from '../model/lora-inputs.js';
import { TEMPLATE_MESSAGES_PY } from './trl-template-messages.js';

/** Each part's PEFT name → its fused module's (q_proj → qkv_proj, …), for the script's lora_targets. */
function fusedModuleNames(): Record<string, string> {
  return Object.fromEntries(FUSED_PROJECTIONS.flatMap((f) => f.parts.map((t) => [PEFT_MODULE_NAMES[t], fusedModuleName(f)])));
}

export interface TrainScriptSettings {
  baseModel: string;
  initAdapter: string | null;
  method: TrlMethod;
  loraR: number;
  loraAlpha: number;
  loraDropout: number;
  /** PEFT module names (q_proj, …). */
  loraTargets: string[];
  /** Hindsight's --loss-agg: grpo's loss_type follows it (sample-mean: "grpo", token-mean: "dapo"). */
  lossAgg: LossAgg;
  /** Hindsight's --opd-topk: sdft distils over the top K with a tail bin (reverse KL) when > 0. */
  opdTopK: number;
}

/** A Python string literal (JSON's escapes are valid Python). */
export const py = (value: string | null): string => (value === null ? 'None' : JSON.stringify(value));

export function trainScript(s: TrainScriptSettings): string {
  return `#!/usr/bin/env python3
"""Fine-tunes a LoRA adapter with TRL on the data Hindsight handed off.

Written by \`hindsight handoff --to trl\`; see README.md beside it for the commands.
The settings below mirror the adapter Hindsight trains locally; change them here or with the flags.
"""
import argparse
import json
import os
import re
import sys

# torch, datasets, peft and transformers take seconds to import: main() imports them after the
# quick checks of the inputs (import_libraries), so a mistake there is reported at once.
torch = load_dataset = LoraConfig = PeftModel = AutoModelForCausalLM = AutoTokenizer = None

BASE_MODEL = ${py(s.baseModel)}
INIT_ADAPTER = ${py(s.initAdapter)}
METHOD = ${py(s.method)}
LORA_R = ${s.loraR}
LORA_ALPHA = ${s.loraAlpha}
LORA_DROPOUT = ${s.loraDropout}
LORA_TARGETS = ${JSON.stringify(s.loraTargets)}
# Phi-3 keeps q/k/v and gate/up in one module each: a target the model lacks is the fused module
# that holds it (Hindsight writes and reads such adapters the same way).
FUSED_MODULES = ${JSON.stringify(fusedModuleNames())}
# Hindsight's --loss-agg: sample-mean averages each completion over its tokens, then over the
# batch (TRL's "grpo" loss_type); token-mean averages over every token of the batch ("dapo").
# Only GRPO has the choice: SDFT always averages per completion; KTO and DPO score whole
# sequences; SFT averages over the batch's tokens.
LOSS_AGG = ${py(s.lossAgg)}
GRPO_LOSS_TYPES = {"sample-mean": "grpo", "token-mean": "dapo"}
# Hindsight's --opd-topk: sdft distils the reverse KL over the top K tokens plus a tail bin.
# TRL takes the student's top K where Hindsight and OpenClaw-RL take the teacher's. 0: SDFT's defaults.
OPD_TOPK = ${s.opdTopK}
LEARNING_RATES = {"kto": 5e-5, "dpo": 5e-5, "sft": 1e-4, "sdft": 2e-5, "grpo": 1e-5}
DATASETS = ${JSON.stringify(DATASET_FILES)}
COLUMNS = ${JSON.stringify(DATASET_FIELDS)}

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--method", choices=${JSON.stringify([...TRL_METHODS])}, default=METHOD)
    p.add_argument("--base-model", default=BASE_MODEL)
    p.add_argument("--init-adapter", default=INIT_ADAPTER, help="continue training this PEFT adapter folder")
    p.add_argument("--output-dir", default=os.path.join(HERE, "output"))
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--batch-size", type=int, default=2, help="per GPU")
    p.add_argument("--grad-accum", type=int, default=8)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--num-generations", type=int, default=4, help="grpo, sdft: completions per prompt")
    p.add_argument("--max-steps", type=int, default=-1, help="stop after this many optimizer steps (a smoke test)")
    p.add_argument("--loss-agg", choices=${JSON.stringify([...LOSS_AGGS])}, default=LOSS_AGG, help="grpo: how the token losses are averaged")
    p.add_argument("--opd-topk", type=int, default=OPD_TOPK, help="sdft: distil over the top K tokens and a tail bin (0: SDFT's defaults)")
    return p.parse_args()


class HandoffError(Exception):
    """A problem with the inputs, reported as one line (no traceback)."""


def first_line(err):
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def check_dataset(method):
    """Every line of data/<method>.jsonl is a JSON object with the method's columns, before any model loads."""
    name = os.path.join("data", DATASETS[method])
    path = os.path.join(HERE, name)
    if not os.path.isfile(path):
        raise HandoffError(f"{name}: missing (the hand-off writes it; run train.py from its folder's copy)")
    rows = 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line.rstrip("\\r\\n"))
            except ValueError as err:
                raise HandoffError(f"{name} line {number}: not JSON ({getattr(err, 'msg', err)} at column {getattr(err, 'colno', '?')})") from None
            missing = [c for c in COLUMNS[method] if not isinstance(row, dict) or c not in row]
            if missing:
                raise HandoffError(f"{name} line {number}: missing column(s) {', '.join(missing)} (expected {', '.join(COLUMNS[method])})")
            rows += 1
    if rows == 0:
        raise HandoffError(f"{name}: no rows to train on")


def import_libraries():
    global torch, load_dataset, LoraConfig, PeftModel, AutoModelForCausalLM, AutoTokenizer
    import torch
    from datasets import load_dataset
    from peft import LoraConfig, PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer


def dataset(name):
    return load_dataset("json", data_files=os.path.join(HERE, "data", name), split="train")


def last_reply_only(row):
    """sft: the conversation before the last reply becomes the prompt and the reply the completion,
    so that SFTTrainer learns the reply's tokens only, as Hindsight does (on a "messages" row it
    learns every token of the conversation, the user's included)."""
    return {"prompt": row["messages"][:-1], "completion": row["messages"][-1:]}


def on_gpu():
    return torch.cuda.is_available()


def check_base_model(path):
    """A local path (absolute, or starting with a dot) must be a folder; anything else is a Hub id."""
    if (os.path.isabs(path) or path.startswith(".")) and not os.path.isdir(path):
        raise HandoffError(f"the base model {path!r} is not a folder (give a local Hugging Face model folder or a Hub id with --base-model)")


def load_tokenizer(args):
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.base_model)
    except (OSError, ValueError) as err:
        raise HandoffError(f"cannot load the base model {args.base_model!r}: {first_line(err)}") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return with_hindsight_messages(tokenizer)


${TEMPLATE_MESSAGES_PY.trim()}


def load_model(args):
    """The base model (bf16 on GPUs, fp32 on a CPU), and either a fresh LoRA config or the --init-adapter loaded trainable."""
    try:
        model = AutoModelForCausalLM.from_pretrained(args.base_model, dtype=torch.bfloat16 if on_gpu() else torch.float32)
    except (OSError, ValueError) as err:
        raise HandoffError(f"cannot load the base model {args.base_model!r}: {first_line(err)}") from None
    model.config.use_cache = False  # gradient checkpointing recomputes activations instead
    if args.init_adapter:
        try:
            return PeftModel.from_pretrained(model, args.init_adapter, is_trainable=True), None
        except (OSError, ValueError) as err:
            raise HandoffError(f"cannot load the adapter {args.init_adapter!r}: {first_line(err)}") from None
    lora = LoraConfig(
        r=LORA_R,
        lora_alpha=LORA_ALPHA,
        lora_dropout=LORA_DROPOUT,
        target_modules=lora_targets(model),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return model, lora


def lora_targets(model):
    """LORA_TARGETS as this model names its linear layers (a fused module where it has no separate one); where
    the language model sits beside a vision tower (Gemma 3's multimodal folders), a pattern over its layers
    only, so that the tower's q_proj and the like stay as they are."""
    names = [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]
    linears = {name.rsplit(".", 1)[-1] for name in names}
    targets = list(dict.fromkeys(t if t in linears else FUSED_MODULES.get(t, t) for t in LORA_TARGETS))
    if any(".language_model." in f".{name}." for name in names):
        return r".*language_model\\..*\\.(?:" + "|".join(targets) + ")"
    return targets


def training_args(args):
    return dict(
        output_dir=args.output_dir,
        num_train_epochs=args.epochs,
        learning_rate=args.lr or LEARNING_RATES[args.method],
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_steps=args.max_steps,
        bf16=on_gpu(),
        use_cpu=not on_gpu(),
        activation_checkpointing=True,  # transformers 5's name for gradient checkpointing
        activation_checkpointing_kwargs={"use_reentrant": False},
        logging_steps=1,
        save_strategy="epoch",
        report_to="none",
    )


def build_trainer(args, model, tokenizer, peft_config):
    common = dict(model=model, processing_class=tokenizer, peft_config=peft_config)
    if args.method == "kto":
        from trl import KTOConfig, KTOTrainer

        config = KTOConfig(beta=0.1, max_length=args.max_length, **training_args(args))
        return KTOTrainer(args=config, train_dataset=dataset("kto.jsonl"), **common)
    if args.method == "dpo":
        from trl import DPOConfig, DPOTrainer

        config = DPOConfig(beta=0.1, max_length=args.max_length, **training_args(args))
        return DPOTrainer(args=config, train_dataset=dataset("dpo.jsonl"), **common)
    if args.method == "sft":
        from trl import SFTConfig, SFTTrainer

        config = SFTConfig(max_length=args.max_length, **training_args(args))
        data = dataset("sft.jsonl").map(last_reply_only, remove_columns=["messages"])
        return SFTTrainer(args=config, train_dataset=data, **common)
    if args.method == "sdft":
        from trl.experimental.sdft import SDFTConfig, SDFTTrainer

        topk = (
            dict(distillation_mode="topk_logits", distillation_topk=args.opd_topk, distillation_alpha=1.0, distillation_add_tail=True)
            if args.opd_topk > 0
            else {}
        )
        config = SDFTConfig(
            num_generations=args.num_generations,
            max_prompt_length=args.max_length // 2,
            max_completion_length=args.max_length // 2,
            **topk,
            **training_args(args),
        )
        # The teacher (teacher_model_kind "base", the default) is the initial student shown the hint
        # (privileged_context): with LoRA, the base model itself.
        return SDFTTrainer(args=config, train_dataset=dataset("sdft.jsonl"), **common)
    from trl import GRPOConfig, GRPOTrainer

    from reward import judge_reward

    config = GRPOConfig(
        num_generations=args.num_generations,
        max_completion_length=args.max_length // 4,
        loss_type=GRPO_LOSS_TYPES[args.loss_agg],
        **training_args(args),
    )
    return GRPOTrainer(reward_funcs=[judge_reward], args=config, train_dataset=dataset("grpo.jsonl"), **common)


def main():
    args = parse_args()
    try:
        check_dataset(args.method)
        check_base_model(args.base_model)
        import_libraries()
        tokenizer = load_tokenizer(args)
        model, peft_config = load_model(args)
    except HandoffError as err:
        sys.exit(f"train.py: {err}")
    trainer = build_trainer(args, model, tokenizer, peft_config)
    trainer.train()
    if trainer.is_fsdp_enabled:
        # Sharded checkpoints during the run; one whole adapter file at the end.
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(args.output_dir)  # adapter_config.json + adapter_model.safetensors
    if trainer.accelerator.is_main_process:
        print(f"adapter written to {args.output_dir}; bring it back with: hindsight score|generate|serve --adapter {args.output_dir}")


if __name__ == "__main__":
    main()
`;
}

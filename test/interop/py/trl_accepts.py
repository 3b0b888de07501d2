"""TRL's trainers take `hindsight export`'s kto, dpo and sft files as they are (no conversion).

usage: trl_accepts.py BASE_DIR OUT_DIR KTO.jsonl DPO.jsonl SFT.jsonl BUNDLE_DIR > out.json
Builds KTOTrainer, DPOTrainer and SFTTrainer (each with a LoRA on the tiny base) on the files
through load_dataset("json"), which is where TRL reads and tokenizes them, and prints for each:
the rows it read, the rows of its tokenized train dataset, that dataset's columns, and every
row's token fields (the *_ids columns, SFT's labels and completion_mask). "sft_handoff" is the
SFT file as a hand-off's train.py gives it to SFTTrainer (its last_reply_only, and its tokenizer,
which parses a tool call's JSON-string arguments where it renders).
"""
import json
import sys

import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer, KTOConfig, KTOTrainer, SFTConfig, SFTTrainer

base_dir, out_dir, kto_file, dpo_file, sft_file, bundle_dir = sys.argv[1:7]
sys.path.insert(0, bundle_dir)
import train as handoff_train  # noqa: E402  (the bundle's train.py; main() does not run on import)

torch.set_num_threads(1)
tokenizer = AutoTokenizer.from_pretrained(base_dir)
common = dict(output_dir=out_dir, use_cpu=True, report_to="none", per_device_train_batch_size=2, max_length=1024)


def build(trainer_class, config, path, convert=None, processing_class=tokenizer):
    data = load_dataset("json", data_files=path, split="train")
    if convert:
        data = data.map(convert, remove_columns=["messages"])  # as the bundle's train.py: `tools` stays
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = trainer_class(model=model, args=config, train_dataset=data, processing_class=processing_class, peft_config=lora)
    tokenized = trainer.train_dataset
    tokens = [{k: list(row[k]) for k in tokenized.column_names if k.endswith("_ids") or k in ("labels", "completion_mask")} for row in tokenized]
    return {"read": len(data), "rows": len(tokenized), "columns": tokenized.column_names, "tokens": tokens}


result = {
    "kto": build(KTOTrainer, KTOConfig(**common), kto_file),
    "dpo": build(DPOTrainer, DPOConfig(**common), dpo_file),
    "sft": build(SFTTrainer, SFTConfig(**common), sft_file),
    "sft_handoff": build(
        SFTTrainer, SFTConfig(**common), sft_file, handoff_train.last_reply_only,
        handoff_train.with_hindsight_messages(AutoTokenizer.from_pretrained(base_dir)),
    ),
}
json.dump(result, sys.stdout)

"""PEFT's side of test/interop/adapters.test.ts: the real library trains, applies and merges
LoRA adapters on a tiny transformers model, so that Hindsight's reading and writing of adapters
is checked against it rather than against a script of ours.

usage: peft_adapters.py make  < spec.json > result.json
       peft_adapters.py check < spec.json > result.json

make:  spec {"base": {make_models.py model entry}, "peft_dir", "texts": [...]}
       Writes the base model (make_models.make), tokenises the texts, and trains a PEFT adapter
       for a few real AdamW steps on them: r 4 with a rank_pattern, an alpha_pattern and
       use_rslora, every projection of both layers; saves it with its weights in bf16.
       Prints the rows' ids and the log-probs of each row (every token after the first) under the
       base, and under the saved adapter applied by PeftModel.from_pretrained (fp32 base) and
       merged into the base by merge_and_unload.
check: spec {"base", "rows": [{"ids", "start"}], "adapters": [{"dir", "merged"}]}
       For each adapter folder (Hindsight's or PEFT's): its log-probs under
       PeftModel.from_pretrained, and the largest difference between merge_and_unload's weights
       and Hindsight's merged folder ("merged"), which transformers also loads as a plain model
       (with its default dtype: the dtype it picks is reported) and scores.
"""
import json
import os
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models import logprobs, make  # noqa: E402

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# Phi-3 has q/k/v and gate/up as one module each, GLM-4 gate/up: PEFT adapts those with one pair.
FUSED = {
    "phi3": {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"},
    "glm4": {"gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"},
}


def base(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def score(model, rows):
    return [logprobs(model, r["ids"], r["start"]) for r in rows]


def train(base_dir, out, rows, family, multimodal=False):
    fused = FUSED.get(family, {})
    name = lambda m: fused.get(m, m)  # noqa: E731
    targets = sorted({name(t) for t in TARGETS})
    # Beside a vision tower (Gemma 3's multimodal model), the language model's layers only, as Hindsight's
    # TRL script asks for them: the tower has q_proj and the like too.
    target_modules = r".*language_model\..*\.(?:" + "|".join(targets) + ")" if multimodal else targets
    config = LoraConfig(
        r=4, lora_alpha=8, target_modules=target_modules, lora_dropout=0.0, use_rslora=True, task_type="CAUSAL_LM",
        # Overlapping keys: PEFT takes the first that matches a module's name, and writes the keys
        # sorted (json sort_keys), so they are given here in sorted order: otherwise PEFT's own
        # reload takes another key than training did and refuses its own file (layer 0's q_proj).
        rank_pattern={f"layers.0.self_attn.{name('q_proj')}": 6, "layers.1.mlp.down_proj": 8, name("q_proj"): 2},
        alpha_pattern={name("v_proj") if family != "phi3" else "o_proj": 3, f"model.layers.1.mlp.{name('up_proj')}": 20},
    )
    torch.manual_seed(1)
    model = get_peft_model(base(base_dir).train(), config)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-2)
    for step in range(6):
        for r in rows:
            ids = torch.tensor([r["ids"]])
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        opt.step()
        opt.zero_grad()
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


def cmd_make(spec):
    tok = make(spec["base"])
    base_dir = spec["base"]["dir"]
    rows = [{"ids": tok(t, add_special_tokens=False)["input_ids"], "start": 1} for t in spec["texts"]]
    train(base_dir, spec["peft_dir"], rows, spec["base"]["family"], spec["base"].get("multimodal", False))
    peft = PeftModel.from_pretrained(base(base_dir), spec["peft_dir"]).eval()
    dtypes = sorted({str(p.dtype) for n, p in peft.named_parameters() if "lora_" in n})
    result = {"rows": rows, "base": score(base(base_dir), rows), "peft": score(peft, rows), "adapter_dtypes_loaded": dtypes}
    result["peft_merged"] = score(peft.merge_and_unload(), rows)
    return result


# A multimodal checkpoint's names as saved (transformers' 4.5x layout, which 5.x still writes) → as loaded.
SAVED_LAYOUT = [("language_model.model.", "model.language_model."), ("language_model.lm_head.", "lm_head."),
                ("vision_tower.", "model.vision_tower."), ("multi_modal_projector.", "model.multi_modal_projector.")]


def as_loaded(name):
    for saved, loaded in SAVED_LAYOUT:
        if name.startswith(saved):
            return loaded + name[len(saved):]
    return name


def cmd_check(spec):
    rows, out = spec["rows"], []
    for a in spec["adapters"]:
        peft = PeftModel.from_pretrained(base(spec["base"]), a["dir"]).eval()
        applied = score(peft, rows)
        merged = peft.merge_and_unload().state_dict()
        theirs = {as_loaded(k): v for k, v in load_file(os.path.join(a["merged"], "model.safetensors")).items()}
        keys = sorted(set(merged) | set(theirs))
        missing = [k for k in keys if k not in merged or k not in theirs]
        tied = [k for k in missing if k == "lm_head.weight"]  # a tied head is saved once, as embed_tokens
        diff = max((merged[k].float() - theirs[k].float()).abs().max().item() for k in keys if k in merged and k in theirs)
        plain = AutoModelForCausalLM.from_pretrained(a["merged"]).eval()
        out.append({
            "dir": a["dir"], "peft": applied, "merged_weight_diff": diff, "missing": [k for k in missing if k not in tied],
            "merged_dtype_default": str(next(plain.parameters()).dtype), "merged_plain": score(plain.float(), rows),
        })
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    command = sys.argv[1]
    result = {"make": cmd_make, "check": cmd_check}[command](json.load(sys.stdin))
    json.dump(result, sys.stdout)

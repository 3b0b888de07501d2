#!/usr/bin/env python3
"""Round-trip fixture for adapters trained elsewhere (docs/design.md §Hand-off).

Writes, for the demo model resources/models/stories260K, a PEFT-layout LoRA adapter the way
a cluster run would save one, with the parts of PEFT's format Hindsight must honour:
random A and B (B non-zero, so the adapter changes the model), bf16 weights, lora_alpha that
is not 2·r, one rank_pattern entry (a module with a larger rank than r), and keys with the
`base_model.model.` prefix. Then it applies that adapter in plain PyTorch (the decoder of
bench/model_torch.py, no transformers or peft) and writes the log-probs of a fixed text.

test/train/peft-roundtrip.test.ts asserts that `hindsight score --adapter` gives the same
log-probs within 1e-4; it uses the committed output, so it needs no Python.

usage: /usr/bin/python3 bench/peft_roundtrip.py [OUT_DIR]   (default test/fixtures/peft-roundtrip)
"""
import json
import os
import re
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model_torch import Decoder, causal_bias  # noqa: E402

ROOT = os.path.dirname(HERE)
MODEL = os.path.join(ROOT, "resources", "models", "stories260K")
PREFIX = "base_model.model."

R = 4
ALPHA = 12.0  # not 2·r: the scaling is alpha / r = 3
TARGETS = ["q_proj", "v_proj", "down_proj"]
RANK_PATTERN = {"model.layers.2.mlp.down_proj": 6}
# "Once upon a time, there was a little girl named Lily. She loved to play in the park with
# her dog." as the demo model's tokenizer encodes it (BOS first).
TEXT_IDS = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401,
            396, 267, 337, 322, 265, 282, 295, 433, 335, 311, 400, 428, 426]
RESPONSE_START = 12


def pattern_value(patterns, module, default):
    """PEFT's lookup: a key matches a module path equal to it or ending in '.<key>'."""
    for key, value in patterns.items():
        if re.match(rf"^(?:.*\.)?(?:{key})$", module):
            return value
    return default


def to_bf16_bits(t):
    """fp32 → bf16 bits, round to nearest even (torch's own conversion)."""
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def write_safetensors(path, tensors):
    """tensors: name → (dtype string, shape, raw bytes), in order."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


class AdaptedDecoder(Decoder):
    """The plain-torch decoder with LoRA applied unmerged: y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ per module."""

    def __init__(self, d, lora):
        super().__init__(d)
        self.lora = lora  # module → (A fp32, B fp32, scaling)

    def lin(self, x, name):
        y = super().lin(x, name)
        if name not in self.lora:
            return y
        a, b, s = self.lora[name]
        return y + ((x @ a.T) @ b.T) * s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "test", "fixtures", "peft-roundtrip")
    adapter_dir = os.path.join(out, "adapter")
    os.makedirs(adapter_dir, exist_ok=True)
    torch.manual_seed(20240611)
    base = Decoder(MODEL)
    tensors, lora = {}, {}
    for layer in range(base.L):
        for target in TARGETS:
            block = "mlp" if target in ("gate_proj", "up_proj", "down_proj") else "self_attn"
            module = f"model.layers.{layer}.{block}.{target}"
            w = base.w[module + ".weight"]
            out_f, in_f = w.shape
            rank = pattern_value(RANK_PATTERN, module, R)
            a = torch.randn(rank, in_f) / in_f ** 0.5
            b = torch.randn(out_f, rank) * 0.05
            a_bits, b_bits = to_bf16_bits(a), to_bf16_bits(b)
            tensors[f"{PREFIX}{module}.lora_A.weight"] = ("BF16", a.shape, a_bits.tobytes())
            tensors[f"{PREFIX}{module}.lora_B.weight"] = ("BF16", b.shape, b_bits.tobytes())
            # The reference applies exactly the stored (bf16-rounded) values, widened to fp32.
            lora[module] = (a.to(torch.bfloat16).float(), b.to(torch.bfloat16).float(), ALPHA / rank)
    write_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"), tensors)
    config = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": R, "lora_alpha": ALPHA, "target_modules": TARGETS,
        "rank_pattern": RANK_PATTERN, "alpha_pattern": {}, "lora_dropout": 0.05, "bias": "none",
        "use_rslora": False, "use_dora": False, "fan_in_fan_out": False, "modules_to_save": None,
        "base_model_name_or_path": "stories260K", "inference_mode": True,
    }
    with open(os.path.join(adapter_dir, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    model = AdaptedDecoder(MODEL, lora)
    with torch.no_grad():
        ids = torch.tensor([TEXT_IDS])
        T = ids.shape[1]
        logits, _ = model.forward(ids, torch.arange(T)[None], causal_bias(torch.ones(1, T, dtype=torch.long), T))
        lp = torch.log_softmax(logits.double(), dim=-1)[0]
        adapted = [float(lp[t - 1, TEXT_IDS[t]]) for t in range(RESPONSE_START, T)]
        base_logits, _ = base.forward(ids, torch.arange(T)[None], causal_bias(torch.ones(1, T, dtype=torch.long), T))
        blp = torch.log_softmax(base_logits.double(), dim=-1)[0]
        base_lp = [float(blp[t - 1, TEXT_IDS[t]]) for t in range(RESPONSE_START, T)]
    with open(os.path.join(out, "input.jsonl"), "w") as f:
        f.write(json.dumps({"input_ids": TEXT_IDS, "response_start": RESPONSE_START}) + "\n")
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"torch": torch.__version__, "logprobs": adapted, "base_logprobs": base_lp}, f, indent=1)
        f.write("\n")
    shift = max(abs(x - y) for x, y in zip(adapted, base_lp))
    print(f"wrote {out}: {len(adapted)} log-probs, the adapter moves them by up to {shift:.3f}")


if __name__ == "__main__":
    main()

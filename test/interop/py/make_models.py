"""Tiny Llama, Mistral, Ministral 3, Phi-3, Granite, Gemma 2 and 3, GLM-4, SmolLM3, OLMo 2 and 3, Qwen2 and Qwen3 checkpoints made by transformers itself, and transformers' own
log-probs and greedy tokens on them, for test/interop/checkpoints.test.ts.

usage: make_models.py < spec.json > result.json
spec: {"models": [{"dir", "family", "tie", "dtype", "head_dim"?, "rope_theta"?, "rope_scaling"?, "attention_bias"?, "sliding_window"?,
                   "partial_rotary_factor"?, "original_max_position_embeddings"?, "max_position_embeddings"?,
                   "embedding_multiplier"?, "attention_multiplier"?, "residual_multiplier"?, "logits_scaling"?,
                   "num_hidden_layers"?, "layer_types"?, "query_pre_attn_scalar"?, "attn_logit_softcapping"?, "final_logit_softcapping"?, "rope_parameters"? (Gemma 3's, per layer type, in place of rope_theta),
                   "multimodal"? (Gemma 3: its multimodal model, the text model beside a tiny vision tower)}],
       "texts": [...], "prompts": [...], "max_new_tokens": N}
Each dir already holds tokenizer.json and tokenizer_config.json. For each model: a random init
(torch.manual_seed(0), initializer_range 0.15, then the RMSNorm weights and Qwen2's q/k/v biases
drawn too (and every bias attention_bias adds), which transformers would leave at 1 and 0, so
that reading them is tested), saved by
save_pretrained as safetensors in the model's dtype; then reloaded from disk in fp32 (a bf16
checkpoint's values widen exactly) and, for each text, the log-prob of every token after the
first; for each prompt (one user message through the chat template), generate(do_sample=False)
and the top-two logit margin at each generated step.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Gemma2Config, Gemma3Config, Glm4Config, Gemma3TextConfig, GraniteConfig, Ministral3Config, Olmo2Config, Olmo3Config, LlamaConfig, MistralConfig, Phi3Config, Qwen2Config, Qwen3Config, SmolLM3Config

CONFIGS = {"llama": LlamaConfig, "mistral": MistralConfig, "phi3": Phi3Config, "granite": GraniteConfig, "gemma2": Gemma2Config, "gemma3": Gemma3TextConfig, "glm4": Glm4Config, "smollm3": SmolLM3Config, "olmo2": Olmo2Config, "olmo3": Olmo3Config, "ministral3": Ministral3Config, "qwen2": Qwen2Config, "qwen3": Qwen3Config}
DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16}


def make(m):
    """Writes model m (a spec entry) into m["dir"] with save_pretrained; returns its tokenizer."""
    tok = AutoTokenizer.from_pretrained(m["dir"])
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    extra = {k: m[k] for k in ("head_dim", "rope_scaling", "attention_bias", "sliding_window", "partial_rotary_factor", "original_max_position_embeddings",
                               "embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling",
                               "layer_types", "query_pre_attn_scalar", "rope_parameters", "attn_logit_softcapping", "final_logit_softcapping") if k in m}
    for k in ("attn_logit_softcapping", "final_logit_softcapping"):  # typed float (JSON writes 5.0 as 5)
        if k in extra:
            extra[k] = float(extra[k])
    if "rope_parameters" not in m:
        extra["rope_theta"] = m.get("rope_theta", 10000.0)
    config = CONFIGS[m["family"]](
        vocab_size=len(tok) + 3, hidden_size=64, intermediate_size=96, num_hidden_layers=m.get("num_hidden_layers", 2), num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=m["tie"], max_position_embeddings=m.get("max_position_embeddings", 512), rms_norm_eps=1e-6,
        initializer_range=0.15, bos_token_id=eot, eos_token_id=im_end,
        pad_token_id=eot, **extra,
    )
    if m.get("multimodal"):
        # Gemma3ForConditionalGeneration, as Gemma 3 4B and up ship: a one-layer SigLIP tower of 4 patches; the
        # image tokens are the vocabulary's last 3 rows, which the tokenizer never makes.
        vocab = config.vocab_size
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14)
        config = Gemma3Config(text_config=config.to_dict(), vision_config=vision, mm_tokens_per_image=4, boi_token_index=vocab - 3,
                              eoi_token_index=vocab - 2, image_token_index=vocab - 1, bos_token_id=eot, eos_token_id=im_end, pad_token_id=eot)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.normal_(1.0, 0.2)
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.2)
    model.to(DTYPES[m["dtype"]]).save_pretrained(m["dir"], safe_serialization=True)
    return tok


def logprobs(model, ids, start):
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return [lp[t - 1, ids[t]].item() for t in range(start, len(ids))]


def main():
    torch.set_num_threads(1)
    spec = json.load(sys.stdin)
    out = []
    for m in spec["models"]:
        tok = make(m)
        model = AutoModelForCausalLM.from_pretrained(m["dir"], dtype=torch.float32).eval()
        saved = json.load(open(f"{m['dir']}/config.json"))
        rows = []
        for text in spec["texts"]:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            rows.append({"ids": ids, "start": 1, "logprobs": logprobs(model, ids, 1)})
        gens = []
        for prompt in spec["prompts"]:
            prompt_ids = list(tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
            with torch.no_grad():
                seq = model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long), do_sample=False,
                                     max_new_tokens=spec["max_new_tokens"], pad_token_id=model.config.pad_token_id)[0].tolist()
                logits = model(torch.tensor([seq])).logits[0].float()
            tokens = seq[len(prompt_ids):]
            top = logits[len(prompt_ids) - 1:len(seq) - 1].topk(2, -1).values
            gens.append({"prompt": prompt, "prompt_ids": prompt_ids, "tokens": tokens, "margins": (top[:, 0] - top[:, 1]).tolist()})
        out.append({"dir": m["dir"], "config": saved, "rows": rows, "generations": gens})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

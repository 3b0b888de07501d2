"""A tiny random Qwen3 made by transformers itself, for test/interop/handoff-trl-run.test.ts.

usage: tiny_qwen3.py DIR [phi3]   (DIR already holds the real Qwen3 tokenizer files)
Writes config.json and model.safetensors (fp32, tied head) with save_pretrained: hidden 64,
2 layers, 4 heads (2 KV heads, head_dim 16), Qwen3's full 151,936-token vocabulary. With
`phi3`, the same sizes as a Phi-3 (Phi3ForCausalLM: fused qkv_proj and gate_up_proj) on that
vocabulary.
"""
import sys

import torch
from transformers import AutoTokenizer, Phi3Config, Phi3ForCausalLM, Qwen3Config, Qwen3ForCausalLM

out = sys.argv[1]
phi3 = sys.argv[2:] == ["phi3"]
tokenizer = AutoTokenizer.from_pretrained(out)
torch.manual_seed(0)
Config, Model = (Phi3Config, Phi3ForCausalLM) if phi3 else (Qwen3Config, Qwen3ForCausalLM)
config = Config(
    vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, max_position_embeddings=2048, rope_theta=10000.0,
    eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"), bos_token_id=None,
)
Model(config).save_pretrained(out, safe_serialization=True)

#!/usr/bin/env python3
"""PyTorch reference for bench/model.ts: the same decoder (Llama / Qwen2 / Qwen3), written
directly from the transformers modelling code in plain torch (no transformers package), run on
the same checkpoint and inputs, timed with the same thread count.

usage: model_torch.py REQUEST.json   → prints one JSON object on stdout
REQUEST: {"model": DIR, "threads": N, "rows": [{"input_ids": [...], "response_start": k}],
          "score_repeats": R, "warm_up_whole_batch": bool, "prompt": [...], "new_tokens": N,
          "generate_repeats": R, "omit_logprobs": bool,
          "prefill_prompt": [...], "prefill_repeats": R, "device": "cpu" | "cuda"}
Each run's wall and CPU seconds are reported, and the process's peak RSS. With "device": "cuda"
(bench/gpu.ts) the weights and every tensor live on the GPU; each timed call ends by reading its
result back to the host, so the times include the GPU's work.
"""
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None}
# Where the weights and activations live; main() sets it from the request.
DEVICE = torch.device("cpu")


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, en = e["data_offsets"]
            f.seek(base + b)
            raw = f.read(en - b)
            if e["dtype"] == "BF16":
                bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
                arr = bits.view(np.float32)
            else:
                arr = np.frombuffer(raw, dtype=DTYPES[e["dtype"]]).astype(np.float32)
            out[name] = torch.from_numpy(arr.reshape(e["shape"]).copy()).to(DEVICE)
    return out


def load_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(load_safetensors(os.path.join(d, f)))
    return w


class Decoder:
    def __init__(self, d):
        c = json.load(open(os.path.join(d, "config.json")))
        self.c = c
        self.w = load_weights(d)
        self.family = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}[c["architectures"][0]]
        self.H = c["hidden_size"]
        self.nH = c["num_attention_heads"]
        self.nKV = c.get("num_key_value_heads", self.nH)
        self.d = c.get("head_dim") or self.H // self.nH
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.L = c["num_hidden_layers"]
        theta = c.get("rope_theta", 10000.0)
        self.inv_freq = (1.0 / (theta ** (torch.arange(0, self.d, 2, dtype=torch.int64).float() / self.d))).to(DEVICE)
        self.head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])

    def rms(self, x, name):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.w[name] * (x * torch.rsqrt(var + self.eps))

    def lin(self, x, name):
        y = x @ self.w[name + ".weight"].T
        b = self.w.get(name + ".bias")
        return y + b if b is not None else y

    @staticmethod
    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, ids, pos, mask_bias, past=None, last_only=False):
        """ids [B,T]; pos [B,T]; mask_bias [B,1,T,S]; past: list of (k, v) [B,nKV,P,d].
        last_only: the head at the last position only (what generation needs of a prefill)."""
        B, T = ids.shape
        h = self.w["model.embed_tokens.weight"][ids]
        freqs = pos[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]
        present = []
        for i in range(self.L):
            h, kv = self.run_layer(i, h, cos, sin, mask_bias, past[i] if past is not None else None)
            present.append(kv)
        if last_only:
            h = h[:, -1:]
        return self.rms(h, "model.norm.weight") @ self.head.T, present

    def run_layer(self, i, h, cos, sin, mask_bias, past_kv):
        """How forward runs a layer (train_torch.py's checkpointed decoder overrides it)."""
        return self.layer(i, h, cos, sin, mask_bias, past_kv)

    def layer(self, i, h, cos, sin, mask_bias, past_kv=None):
        """One decoder layer: (new h, (k, v) with the past prepended)."""
        B, T = h.shape[0], h.shape[1]
        rep = self.nH // self.nKV
        p = f"model.layers.{i}"
        x = self.rms(h, f"{p}.input_layernorm.weight")
        q = self.lin(x, f"{p}.self_attn.q_proj").view(B, T, self.nH, self.d)
        k = self.lin(x, f"{p}.self_attn.k_proj").view(B, T, self.nKV, self.d)
        v = self.lin(x, f"{p}.self_attn.v_proj").view(B, T, self.nKV, self.d).transpose(1, 2)
        if self.family == "qwen3":
            q = self.rms(q, f"{p}.self_attn.q_norm.weight")
            k = self.rms(k, f"{p}.self_attn.k_norm.weight")
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q = q * cos + self.rotate_half(q) * sin
        k = k * cos + self.rotate_half(k) * sin
        if past_kv is not None:
            k = torch.cat((past_kv[0], k), dim=2)
            v = torch.cat((past_kv[1], v), dim=2)
        # transformers' repeat_kv: expand the KV heads over their query group
        S = k.shape[2]
        kr = k[:, :, None].expand(B, self.nKV, rep, S, self.d).reshape(B, self.nH, S, self.d)
        vr = v[:, :, None].expand(B, self.nKV, rep, S, self.d).reshape(B, self.nH, S, self.d)
        scores = (q @ kr.transpose(2, 3)) / math.sqrt(self.d) + mask_bias
        attn = torch.softmax(scores, dim=-1) @ vr
        h = h + self.lin(attn.transpose(1, 2).reshape(B, T, self.nH * self.d), f"{p}.self_attn.o_proj")
        y = self.rms(h, f"{p}.post_attention_layernorm.weight")
        gate = self.lin(y, f"{p}.mlp.gate_proj")
        h = h + self.lin(torch.nn.functional.silu(gate) * self.lin(y, f"{p}.mlp.up_proj"), f"{p}.mlp.down_proj")
        return h, (k, v)


def causal_bias(mask, T):
    """mask [B,S] (1 real); the last T positions are queries."""
    B, S = mask.shape
    q = torch.arange(S - T, S, device=mask.device)[:, None]
    k = torch.arange(S, device=mask.device)[None, :]
    allowed = (k <= q)[None] & (mask[:, None, :] > 0)
    return torch.where(allowed, 0.0, -1e9)[:, None]


def score(model, rows):
    T = max(len(r["input_ids"]) for r in rows)
    B = len(rows)
    ids = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, : len(r["input_ids"])] = torch.tensor(r["input_ids"])
        mask[b, : len(r["input_ids"])] = 1
    ids, mask = ids.to(DEVICE), mask.to(DEVICE)
    pos = torch.arange(T, device=DEVICE)[None].expand(B, T)
    logits, _ = model.forward(ids, pos, causal_bias(mask, T))
    lp = torch.log_softmax(logits.float(), dim=-1)
    out = []
    for b, r in enumerate(rows):
        n, s = len(r["input_ids"]), r["response_start"]
        tgt = ids[b, s:n]
        out.append(lp[b, s - 1 : n - 1].gather(-1, tgt[:, None])[:, 0].tolist())
    return out


def generate(model, prompt, n):
    ids = torch.tensor([prompt], device=DEVICE)
    past = None
    total = len(prompt)
    feed = ids
    out = []
    for step in range(n):
        T = feed.shape[1]
        pos = torch.arange(total - T, total, device=DEVICE)[None]
        logits, past = model.forward(feed, pos, causal_bias(torch.ones(1, total, dtype=torch.long, device=DEVICE), T), past)
        tok = int(logits[0, -1].argmax())
        out.append(tok)
        feed = torch.tensor([[tok]], device=DEVICE)
        total += 1
    return out


def prefill(model, prompt):
    """A prompt's prefill as transformers runs it (eager attention, the head at the last
    position only): the greedy first token."""
    T = len(prompt)
    ids = torch.tensor([prompt], device=DEVICE)
    logits, _ = model.forward(ids, torch.arange(T, device=DEVICE)[None], causal_bias(torch.ones(1, T, dtype=torch.long, device=DEVICE), T), last_only=True)
    return int(logits[0, -1].argmax())


def main():
    global DEVICE
    req = json.load(open(sys.argv[1]))
    DEVICE = torch.device(req.get("device", "cpu"))
    torch.set_num_threads(req.get("threads", 1))
    torch.set_grad_enabled(False)
    t0 = time.time()
    model = Decoder(req["model"])
    result = {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": str(DEVICE), "load_s": time.time() - t0}
    if req.get("rows"):
        score(model, req["rows"] if req.get("warm_up_whole_batch") else req["rows"][:1])  # warm-up
        times, cpu = [], []
        for _ in range(req.get("score_repeats", 1)):
            t, c = time.time(), time.process_time()
            result["logprobs"] = score(model, req["rows"])
            times.append(time.time() - t)
            cpu.append(time.process_time() - c)
        result["score_s"] = min(times)
        result["score_runs"] = [{"wall_s": w, "cpu_s": c} for w, c in zip(times, cpu)]
    if req.get("prompt"):
        generate(model, req["prompt"], 2)  # warm-up
        runs = []
        for _ in range(req.get("generate_repeats", 1)):
            t, c = time.time(), time.process_time()
            result["generated"] = generate(model, req["prompt"], req["new_tokens"])
            runs.append({"wall_s": time.time() - t, "cpu_s": time.process_time() - c})
        result["generate_s"] = runs[0]["wall_s"]
        result["generate_runs"] = runs
    if req.get("prefill_prompt"):
        prefill(model, req["prefill_prompt"][:64])  # warm-up
        runs = []
        for _ in range(req.get("prefill_repeats", 1)):
            t, c = time.time(), time.process_time()
            result["first_token"] = prefill(model, req["prefill_prompt"])
            runs.append({"wall_s": time.time() - t, "cpu_s": time.process_time() - c})
        result["prefill_runs"] = runs
    if req.get("omit_logprobs"):
        result.pop("logprobs", None)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch reference for bench/train.ts: the same LoRA training step (PPO-clip loss of docs/design.md §Losses,
global-norm clipping, AdamW) on the same checkpoint, LoRA weights and batch, timed with the
same thread count. The decoder is bench/model_torch.py's plain-torch one; LoRA is added on
each targeted projection as y + ((x·Aᵀ)·s)·Bᵀ, as the ONNX training graph does.

usage: train_torch.py REQUEST.json   → prints one JSON object on stdout
REQUEST: {"model": DIR, "adapter": PEFT_DIR, "threads": N, "repeats": R, "lr": X, "max_grad_norm": X,
          "eps_low": X, "eps_high": X, "batch": {"input_ids", "response_mask", "old", "advantages"} ([B][T], token grid: position t = token t),
          "checkpoint": bool (torch.utils.checkpoint per layer), "old_from_policy": bool (old := stopgrad(logp), as the trainer),
          "device": "cpu" | "cuda" (model_torch.py's DEVICE; a step ends by reading its loss back, so its time includes the GPU's work)}
"""
import json
import os
import resource
import sys
import time

import torch
import torch.utils.checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_torch  # noqa: E402
from model_torch import Decoder, causal_bias, load_safetensors  # noqa: E402

PREFIX = "base_model.model."


class LoraDecoder(Decoder):
    def __init__(self, d, adapter, checkpoint=False):
        super().__init__(d)
        self.checkpoint = checkpoint
        cfg = json.load(open(os.path.join(adapter, "adapter_config.json")))
        self.scaling = cfg["lora_alpha"] / cfg["r"]
        tensors = load_safetensors(os.path.join(adapter, "adapter_model.safetensors"))
        self.lora = {}
        for key, t in tensors.items():
            module = key[len(PREFIX):].rsplit(".lora_", 1)[0]
            self.lora.setdefault(module, {})[key.rsplit(".", 2)[1]] = t.clone().requires_grad_(True)

    def run_layer(self, i, h, cos, sin, mask_bias, past_kv):
        if not self.checkpoint:
            return super().run_layer(i, h, cos, sin, mask_bias, past_kv)
        # torch.utils.checkpoint: keep the layer's input only, run it again in the backward pass.
        out = torch.utils.checkpoint.checkpoint(lambda x: self.layer(i, x, cos, sin, mask_bias)[0], h, use_reentrant=False)
        return out, None

    def params(self):
        return [p for m in self.lora.values() for p in (m["lora_A"], m["lora_B"])]

    def lin(self, x, name):
        y = super().lin(x, name)
        ab = self.lora.get(name)
        if ab is None:
            return y
        return y + ((x @ ab["lora_A"].T) * self.scaling) @ ab["lora_B"].T


def step(model, opt, batch, req):
    ids = batch["ids"]
    B, T = ids.shape
    pos = torch.arange(T, device=ids.device)[None].expand(B, T)
    logits, _ = model.forward(ids, pos, causal_bias(torch.ones(B, T, dtype=torch.long, device=ids.device), T))
    lp = torch.log_softmax(logits.float(), dim=-1)[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]  # token t+1 at t
    mask, old, adv = batch["mask"][:, 1:], batch["old"][:, 1:], batch["adv"][:, 1:]
    if req.get("old_from_policy"):
        old = lp.detach()  # as the trainer's step does: old := stopgrad(logp), ratio 1
    ratio = torch.exp(lp - old)
    clipped = ratio.clamp(1 - req["eps_low"], 1 + req["eps_high"])
    obj = torch.minimum(ratio * adv, clipped * adv)
    loss = -(mask * obj).sum() / mask.sum().clamp(min=1)
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.params(), req["max_grad_norm"])
    opt.step()
    return float(loss), float(norm)


def main():
    req = json.load(open(sys.argv[1]))
    model_torch.DEVICE = device = torch.device(req.get("device", "cpu"))
    torch.set_num_threads(req["threads"])
    t0 = time.time()
    model = LoraDecoder(req["model"], req["adapter"], checkpoint=req.get("checkpoint", False))
    b = req["batch"]
    batch = {
        "ids": torch.tensor(b["input_ids"], dtype=torch.long, device=device),
        "mask": torch.tensor(b["response_mask"], dtype=torch.float32, device=device),
        "old": torch.tensor(b["old"], dtype=torch.float32, device=device),
        "adv": torch.tensor(b["advantages"], dtype=torch.float32, device=device),
    }
    opt = torch.optim.AdamW(model.params(), lr=req["lr"], betas=(0.9, 0.98), eps=1e-8, weight_decay=0.0)
    load_s = time.time() - t0
    first_loss, first_norm = step(model, opt, batch, req)  # warm-up, from the initial weights
    times, cpu = [], []
    for _ in range(req["repeats"]):
        t, c = time.time(), time.process_time()
        step(model, opt, batch, req)
        times.append(time.time() - t)
        cpu.append(time.process_time() - c)
    median = len(times) // 2
    print(json.dumps({
        "torch": torch.__version__, "threads": torch.get_num_threads(), "load_s": load_s,
        "first_loss": first_loss, "first_grad_norm": first_norm, "step_s": sorted(times)[median],
        "step_cpu_s": sorted(zip(times, cpu))[median][1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **({"profile": profiled_step(model, opt, batch, req, device)} if req.get("profile") else {}),
    }))


def profiled_step(model, opt, batch, req, device):
    """One more step under torch.profiler, after the timed ones (whose times it leaves alone):
    its wall time and the top 15 ops by their own time on the GPU (CPU time on the CPU), for
    bench/gpu.ts's BENCH_PROFILE beside Hindsight's ONNX Runtime profile."""
    from torch.profiler import ProfilerActivity, profile
    on_gpu = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])) as prof:
        t = time.time()
        step(model, opt, batch, req)  # returns floats, so the GPU has finished
        wall = time.time() - t
    def own_us(e):  # self_device_time_total since torch 2.4, self_cuda_time_total before
        return getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) if on_gpu else e.self_cpu_time_total
    ops = sorted(prof.key_averages(), key=own_us, reverse=True)
    return {
        "wall_ms": wall * 1e3, "clock": "GPU" if on_gpu else "CPU",
        "total_ms": sum(own_us(e) for e in ops) / 1e3,
        "top": [{"op": e.key, "calls": e.count, "ms": own_us(e) / 1e3} for e in ops[:15]],
    }


if __name__ == "__main__":
    main()

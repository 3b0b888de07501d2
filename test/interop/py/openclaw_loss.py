"""OpenClaw-RL's losses on given inputs, for test/interop/openclaw-loss.test.ts.

usage: openclaw_loss.py < cases.json > results.json

With OPENCLAW_RL_DIR naming a checkout of github.com/Gen-Verse/OpenClaw-RL, its own code runs:
slime's compute_policy_loss (slime/slime/utils/ppo_utils.py) and get_sum_of_sample_mean
(slime/slime/backends/megatron_utils/cp_utils.py), and openclaw-opd/topk_distillation_loss.py's
topk_distillation_loss_function, loaded from their files with the few Megatron pieces they import
replaced by one-process stand-ins (no tensor or context parallelism: world sizes 1; the vocabulary
log-softmax that Megatron's fused cross-entropy computes; get_responses cutting the concatenated
response logits by each sample's length). Without it, the same formulas as this file restates
them (from reading that code) run instead; "mode" in the output says which.

Either way the loss is then scaled as slime's loss_function does with one micro-batch and one
data-parallel rank: sample-mean (the default) × 1 / global batch size; per-token
(--calculate-per-token-loss) ÷ Σ_i max(trained tokens of sample i, 1). Everything in float64.

Each case is {"kind": "policy" | "topk", "agg": "sample-mean" | "token-mean", ...} (see the test);
the answer per case is {"loss": x, "grad": [...]}: the gradient with respect to the new log-probs
("policy") or the response logits ("topk").
"""
import importlib.util
import json
import os
import sys
import types
from argparse import Namespace

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
DIR = os.environ.get("OPENCLAW_RL_DIR", "")


def load(name, relative):
    path = os.path.join(DIR, relative)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def stand_ins():
    """The Megatron and slime modules the loss files import, as one-process stand-ins."""
    mpu = types.SimpleNamespace(
        get_context_parallel_world_size=lambda: 1,
        get_tensor_model_parallel_group=lambda: None,
        get_data_parallel_world_size=lambda with_context_parallel=False: 1,
    )
    megatron = types.ModuleType("megatron")
    core = types.ModuleType("megatron.core")
    core.mpu = mpu
    megatron.core = core
    sys.modules.update({"megatron": megatron, "megatron.core": core})

    def compute_log_probs(logits, tokens, process_group):
        # What Megatron's fused vocab-parallel cross-entropy negates: log_softmax(logits)[token].
        return torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1))

    def get_responses(logits, *, args, unconcat_tokens, total_lengths, response_lengths, max_seq_lens=None):
        # Here `logits` holds the response positions only, concatenated: cut by each sample's length.
        start = 0
        for tokens, length in zip(unconcat_tokens, response_lengths):
            yield logits[start : start + length], tokens[-length:]
            start += length

    for name in ["slime", "slime.utils", "slime.backends", "slime.backends.megatron_utils"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    ppo_stub = types.ModuleType("slime.utils.ppo_utils")
    ppo_stub.compute_log_probs = compute_log_probs
    loss_stub = types.ModuleType("slime.backends.megatron_utils.loss")
    loss_stub.get_responses = get_responses
    sys.modules["slime.utils.ppo_utils"] = ppo_stub
    sys.modules["slime.backends.megatron_utils.loss"] = loss_stub


def openclaw_functions():
    stand_ins()
    ppo = load("openclaw_ppo_utils", "slime/slime/utils/ppo_utils.py")
    cp = load("openclaw_cp_utils", "slime/slime/backends/megatron_utils/cp_utils.py")
    topk = load("openclaw_topk", "openclaw-opd/topk_distillation_loss.py")
    return ppo.compute_policy_loss, cp.get_sum_of_sample_mean, topk.topk_distillation_loss_function


# ── the same formulas, restated ────────────────────────────────────────────────────────


def restated_policy_loss(ppo_kl, advantages, eps_clip, eps_clip_high):
    ratio = torch.exp(-ppo_kl)
    unclipped = -ratio * advantages
    clipped = -torch.clamp(ratio, 1 - eps_clip, 1 + eps_clip_high) * advantages
    return torch.maximum(unclipped, clipped), (clipped > unclipped).double()


def restated_sum_of_sample_mean(total_lengths, response_lengths, loss_masks, calculate_per_token_loss=False, *rest, **kw):
    def per_sample(x):
        return sum((xi * m).sum() / torch.clamp_min(m.sum(), 1) for xi, m in zip(x.split(response_lengths), loss_masks))

    def per_token(x):
        return sum((xi * m).sum() for xi, m in zip(x.split(response_lengths), loss_masks))

    return per_token if calculate_per_token_loss else per_sample


def restated_topk(args, batch, logits, sum_of_sample_mean):
    K = args.distill_topk
    student, teacher = [], []
    start = 0
    for length, t_lp, t_idx in zip(batch["response_lengths"], batch["teacher_topk_log_probs"], batch["teacher_topk_indices"]):
        lp = torch.log_softmax(logits[start : start + length], dim=-1)
        student.append(lp.gather(-1, t_idx[:, :K]))
        teacher.append(t_lp)
        start += length
    s, t = torch.cat(student), torch.cat(teacher)

    def with_tail(x):
        mass = torch.clamp(torch.logsumexp(x, dim=-1, keepdim=True), max=-1e-7)
        return torch.cat([x, torch.log(-torch.expm1(mass))], dim=-1)

    s, t = with_tail(s), with_tail(t)
    per_token = (torch.exp(s) * (s - t)).sum(-1)  # KL(student ‖ teacher) over K + 1 bins
    return sum_of_sample_mean(per_token), {}


# ── the cases ──────────────────────────────────────────────────────────────────────────


def scaled(loss, agg, loss_masks):
    """slime's loss_function with one micro-batch on one rank."""
    if agg == "sample-mean":
        return loss / len(loss_masks)
    return loss / sum(torch.clamp_min(m.sum(), 1) for m in loss_masks)


def main():
    cases = json.load(sys.stdin)
    if DIR:
        policy_loss, sum_of_sample_mean_of, topk_loss = openclaw_functions()
        mode = "openclaw"
    else:
        policy_loss, sum_of_sample_mean_of, topk_loss = restated_policy_loss, restated_sum_of_sample_mean, restated_topk
        mode = "restated"
    out = []
    for case in cases:
        lengths = case["response_lengths"]
        masks = [torch.tensor(m, dtype=torch.float64) for m in case["loss_masks"]]
        aggregate = sum_of_sample_mean_of([len(m) + 1 for m in masks], lengths, masks, case["agg"] == "token-mean")
        if case["kind"] == "policy":
            new = torch.tensor(case["log_probs"], dtype=torch.float64, requires_grad=True)
            old = torch.tensor(case["old_log_probs"], dtype=torch.float64)
            adv = torch.tensor(case["advantages"], dtype=torch.float64)
            pg, _ = policy_loss(old - new, adv, case["eps_clip"], case["eps_clip_high"])
            loss = scaled(aggregate(pg), case["agg"], masks)
            loss.backward()
            out.append({"loss": loss.item(), "grad": new.grad.tolist()})
        else:
            K = case["k"]
            logits = torch.tensor(case["logits"], dtype=torch.float64, requires_grad=True)
            split = lambda rows: [torch.tensor(rows[sum(lengths[:i]) : sum(lengths[: i + 1])]) for i in range(len(lengths))]
            batch = {
                "teacher_topk_log_probs": [t.double() for t in split(case["teacher_logprobs"])],
                "teacher_topk_indices": [t.long() for t in split(case["teacher_indices"])],
                "response_lengths": lengths,
                "total_lengths": [n + 1 for n in lengths],
                "unconcat_tokens": [torch.zeros(n + 1, dtype=torch.long) for n in lengths],
            }
            loss, _ = topk_loss(Namespace(distill_topk=K, entropy_coef=0.0), batch, logits, aggregate)
            loss = scaled(loss, case["agg"], masks)
            loss.backward()
            out.append({"loss": loss.item(), "grad": logits.grad.flatten().tolist()})
    json.dump({"mode": mode, "results": out}, sys.stdout)


main()

"""Log-probs of replies under a base model, bare and with PEFT adapters, for the interop tests.

usage: peft_logprobs.py BASE_DIR ROWS.jsonl [ADAPTER_DIR ...] > out.json
Each row is {"messages": [...], "response": "..."}; the tokens are transformers' own:
apply_chat_template(messages, add_generation_prompt=True) for the prompt, the whole conversation
with the reply for the rest (the prompt must be its prefix). Prints one JSON object: for "base"
and each adapter folder, a list per row of the log-prob of every reply token given what precedes,
in fp32, with the adapter applied by PeftModel.from_pretrained.
"""
import json
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

base_dir, rows_file, adapters = sys.argv[1], sys.argv[2], sys.argv[3:]
torch.set_num_threads(1)
tokenizer = AutoTokenizer.from_pretrained(base_dir)
with open(rows_file, encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]


def ids_of(row):
    prompt = tokenizer.apply_chat_template(row["messages"], add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    whole = tokenizer.apply_chat_template(row["messages"] + [{"role": "assistant", "content": row["response"]}], tokenize=True, return_dict=True)["input_ids"]
    if list(whole[: len(prompt)]) != list(prompt):
        sys.exit("peft_logprobs.py: the prompt's tokens are not a prefix of the conversation's")
    return list(whole), len(prompt)


def score(model):
    out = []
    for row in rows:
        ids, start = ids_of(row)
        with torch.no_grad():
            logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
        out.append([logprobs[t - 1, ids[t]].item() for t in range(start, len(ids))])
    return out


def base():
    return AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval()


result = {"base": score(base())}
for adapter in adapters:
    result[adapter] = score(PeftModel.from_pretrained(base(), adapter).eval())
json.dump(result, sys.stdout)

"""Renders chat templates with transformers, for test/interop/templates.test.ts.

stdin: a JSON list of {dir, messages, tools, add_generation_prompt, extra}; stdout: a JSON list
of {text, ids}: what `AutoTokenizer.from_pretrained(dir).apply_chat_template` renders, as text
(tokenize=False) and as token ids (tokenize=True), the way TRL and transformers' users call it.
A case {dir, text} is encoded instead: the tokenizer's ids of the text, no special tokens added.
"""
import json
import sys

from transformers import AutoTokenizer

tokenizers = {}
out = []
for case in json.load(sys.stdin):
    tok = tokenizers.get(case["dir"])
    if tok is None:
        tok = tokenizers[case["dir"]] = AutoTokenizer.from_pretrained(case["dir"])
    if "text" in case:
        out.append({"text": case["text"], "ids": tok(case["text"], add_special_tokens=False)["input_ids"]})
        continue
    kwargs = dict(tools=case.get("tools"), add_generation_prompt=case["add_generation_prompt"], **case.get("extra", {}))
    text = tok.apply_chat_template(case["messages"], tokenize=False, **kwargs)
    ids = tok.apply_chat_template(case["messages"], tokenize=True, return_dict=True, **kwargs)["input_ids"]
    out.append({"text": text, "ids": list(ids)})
json.dump(out, sys.stdout)

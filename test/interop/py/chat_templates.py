"""Renders chat templates with transformers, for test/interop/templates.test.ts.

stdin: a JSON list of {dir, messages, tools, add_generation_prompt, extra}; stdout: a JSON list
of {text, ids}: what `AutoTokenizer.from_pretrained(dir).apply_chat_template` renders, as text
(tokenize=False) and as token ids (tokenize=True), the way TRL and transformers' users call it.
A case {dir, text} is encoded instead: the tokenizer's ids of the text, no special tokens added.

A case whose messages hold a null (DeepSeek's templates write a call only for an assistant turn
whose content is None) is rendered by transformers' own renderer with the messages as given:
transformers 5 drops the keys whose value is None before rendering, which sends DeepSeek's
templates into their text branch and a missing `content` (they raise), where transformers 4
passed None to the template as DeepSeek's templates expect.
"""
import json
import sys

from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import render_jinja_template

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
    if any(value is None for message in case["messages"] for value in message.values()):
        rendered, _ = render_jinja_template(conversations=[case["messages"]], chat_template=tok.chat_template, **{**tok.special_tokens_map, **kwargs})
        out.append({"text": rendered[0], "ids": tok(rendered[0], add_special_tokens=False)["input_ids"]})
        continue
    text = tok.apply_chat_template(case["messages"], tokenize=False, **kwargs)
    ids = tok.apply_chat_template(case["messages"], tokenize=True, return_dict=True, **kwargs)["input_ids"]
    out.append({"text": text, "ids": list(ids)})
json.dump(out, sys.stdout)

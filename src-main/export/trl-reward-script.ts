// reward.py of a GRPO hand-off (docs/design.md §Hand-off): a reward that asks an
// OpenAI-compatible judge with Hindsight's own reward prompt (judge_prompts.json beside it).
// Fixed text but for the judge's address and model; train.py is ./trl-script.ts.
import { py } from './trl-script.js';

/** reward.py: Hindsight's reward judge over HTTP, as a GRPO reward function. */
export function rewardScript(judgeUrl: string, judgeModel: string): string {
  return `"""GRPO reward: asks an OpenAI-compatible judge with Hindsight's own reward prompt.

Each completion is judged against the next state that followed the recorded reply: the user's
next message (or the tool's output) is evidence of what the user wanted. The judge answers
\\\\boxed{1}, \\\\boxed{-1} or \\\\boxed{0}, which is the reward; an unreadable answer or a failed
request counts 0. Settings: HINDSIGHT_JUDGE_URL, HINDSIGHT_JUDGE_MODEL, HINDSIGHT_JUDGE_API_KEY.
"""
import json
import os
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "judge_prompts.json"), encoding="utf-8") as f:
    PROMPTS = json.load(f)
JUDGE_URL = os.environ.get("HINDSIGHT_JUDGE_URL", ${py(judgeUrl)})
JUDGE_MODEL = os.environ.get("HINDSIGHT_JUDGE_MODEL", ${py(judgeModel)})
JUDGE_API_KEY = os.environ.get("HINDSIGHT_JUDGE_API_KEY", "")
PARALLEL = int(os.environ.get("HINDSIGHT_JUDGE_PARALLEL", "8"))


def clip(text, limit=PROMPTS["max_section_chars"]):
    """Keeps the head and the tail of a long text, as Hindsight's judge does."""
    if len(text) <= limit:
        return text
    head = -(-limit * 6 // 10)
    tail = limit - head
    return f"{text[:head]}\\n[… {len(text) - limit} characters omitted …]\\n{text[len(text) - tail:]}"


def strip_reasoning(text):
    close = text.rfind("</think>")
    if close >= 0:
        return text[close + len("</think>"):]
    start = text.find("<think>")
    return text[:start] if start >= 0 else text


def last_boxed(text):
    start = -1
    i = text.find("\\\\boxed")
    while i >= 0:
        brace = text.find("{", i)
        if brace >= 0 and text[i + len("\\\\boxed"):brace].strip() == "":
            start = brace + 1
        i = text.find("\\\\boxed", i + 1)
    if start < 0:
        return None
    depth = 1
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[start:j]
    return None


def reward_of(answer):
    boxed = last_boxed(strip_reasoning(answer or ""))
    if boxed is None:
        return 0.0
    value = boxed.replace("$", "").replace("\\\\text{", "").replace("}", "").replace("−", "-").strip()
    return {"1": 1.0, "+1": 1.0, "-1": -1.0, "0": 0.0}.get(value, 0.0)


def ask_judge(reply, next_state, role):
    templates = PROMPTS["reward"]["user_templates"]
    user = templates["tool" if role == "tool" else "user"]
    user = user.replace("<<<REPLY>>>", clip(reply.strip() or "(empty reply)")).replace("<<<NEXT_STATE>>>", clip(next_state.strip() or "(empty)"))
    body = {
        "model": JUDGE_MODEL,
        "messages": [{"role": "system", "content": PROMPTS["reward"]["system"]}, {"role": "user", "content": user}],
        "temperature": 0,
    }
    headers = {"Content-Type": "application/json"}
    if JUDGE_API_KEY:
        headers["Authorization"] = f"Bearer {JUDGE_API_KEY}"
    request = urllib.request.Request(JUDGE_URL.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.load(response)["choices"][0]["message"].get("content") or ""
    except Exception as err:  # a judge outage must not stop the run: the sample counts 0
        print(f"reward: judge request failed: {err}", file=sys.stderr)
        return 0.0
    return reward_of(answer)


def completion_text(completion):
    return completion[-1]["content"] if isinstance(completion, list) else completion


def judge_reward(prompts, completions, next_state, next_state_role, **kwargs):
    """TRL calls this with the dataset's extra columns as keyword arguments."""
    jobs = list(zip([completion_text(c) for c in completions], next_state, next_state_role))
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return list(pool.map(lambda job: ask_judge(*job), jobs))
`;
}

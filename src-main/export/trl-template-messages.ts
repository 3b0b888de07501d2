// The part of a TRL hand-off's train.py that gives the base model's chat template a conversation
// in the form Hindsight gives it (docs/design.md §Hand-off, §Tool-call dialects), so that TRL on
// the cluster trains the tokens Hindsight trains at home. It is the Python of two TypeScript
// places, which the cluster cannot run, and must stay in step with them (the interop test
// test/interop/handoff-trl-run.test.ts renders each family's template both ways):
//   src-main/model/template-context.ts templateMessages   ids cut to the template's length,
//                                                          calls' arguments parsed
//   src-main/model/tool-call-dialects.ts TOOL_CALL_DIALECTS each family's history rewrite, and
//                                                          the end a trained reply gets where its
//                                                          template writes none (replyEnd: GLM-4,
//                                                          DeepSeek-R1's single call), added after a
//                                                          conversation that ends with a reply
// transformers renders the rest itself. One difference it forces: transformers 5 drops a message's
// keys whose value is None, and DeepSeek's templates write a turn's calls only where its content
// `is none`; the wrapper lets them read a missing content as none.

/** Python functions; train.py defines `with_hindsight_messages(tokenizer)` from them. Needs `json` and `re`. */
export const TEMPLATE_MESSAGES_PY = String.raw`
def with_hindsight_messages(tokenizer):
    """The tokenizer, its apply_chat_template giving the template each conversation as Hindsight
    gives it: tool-call ids cut to the length the template checks (Mistral's 9), arguments parsed
    from the datasets' JSON strings (one Arrow column whatever each tool takes; Qwen2.5's and Llama
    3.1's templates write "arguments | tojson", which would quote a string), and the conversation in
    its family's tool-call form (DeepSeek, Granite 3, GLM-4, Phi-4-mini); a conversation that ends
    with a reply (what TRL trains) gets the end Hindsight trains after it where the template writes
    none. So TRL trains the tokens Hindsight would."""
    default, tool_use = chat_templates(tokenizer)
    dialect_template = tool_use or default or ""
    dialect = tool_call_dialect(dialect_template)
    cut = re.search(r"(?:\.id|tool_call_id)\s*\|\s*length\s*!=\s*(\d+)", "\n".join(t for t in (default, tool_use) if t))
    id_length = int(cut.group(1)) if cut else None
    patched = none_content_as_missing(tokenizer.chat_template) if dialect == "deepseek" else None
    if isinstance(patched, dict):
        tokenizer.chat_template = patched  # named templates: patched in place (DeepSeek's are one string)
    render = tokenizer.apply_chat_template

    def apply_chat_template(conversation, *args, **kwargs):
        if isinstance(patched, str) and kwargs.get("chat_template") is None:  # TRL passes chat_template=None
            kwargs["chat_template"] = patched  # given per call, so the tokenizer saved with the adapter keeps its own
        tools = kwargs.get("tools")
        if conversation and isinstance(conversation[0], list):
            return render([template_messages(c, dialect, dialect_template, id_length, tools) for c in conversation], *args, **kwargs)
        rewritten = template_messages(conversation, dialect, dialect_template, id_length, tools)
        out = render(rewritten, *args, **kwargs)
        if args or kwargs.get("add_generation_prompt") or kwargs.get("continue_final_message"):
            return out
        text_kwargs = {k: v for k, v in kwargs.items() if k not in TOKENIZING_KWARGS}
        render_text = lambda messages, **more: render(messages, tokenize=False, **text_kwargs, **more)
        # The conversation's text: out itself where it was asked for as text, else rendered once more.
        end = reply_end(dialect, conversation, rewritten, render_text, out if isinstance(out, str) else None)
        return with_reply_end(out, end, tokenizer) if end else out

    tokenizer.apply_chat_template = apply_chat_template
    return tokenizer


# apply_chat_template's keywords that shape its output rather than the text it renders.
TOKENIZING_KWARGS = {"tokenize", "return_dict", "return_tensors", "return_assistant_tokens_mask", "padding", "truncation", "max_length", "add_generation_prompt", "continue_final_message"}


def reply_end(dialect, conversation, rewritten, render_text, full=None):
    """tool-call-dialects.ts replyEnd: where the template writes nothing after the reply that ends
    the conversation (the one TRL trains), the token the model ends it with, which Hindsight trains
    too: GLM-4's next turn's opening, DeepSeek-R1's end of a single call."""
    if not conversation or conversation[-1].get("role") != "assistant":
        return ""
    calls = calls_of(conversation[-1])
    if dialect == "glm4":
        return "<|observation|>" if calls else "<|user|>"
    if dialect != "deepseek" or not calls:
        return ""
    full = full if full is not None else render_text(rewritten)
    prompt = render_text(rewritten[:-1], add_generation_prompt=True)
    reply = full[len(prompt):] if full.startswith(prompt) else full
    return "" if "<｜tool▁calls▁end｜>" in reply else "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>"


def with_reply_end(out, end, tokenizer):
    """apply_chat_template's output with end after it: text, ids, or a dict of them (TRL's)."""
    if isinstance(out, str):
        return out + end
    ids = tokenizer.encode(end, add_special_tokens=False)
    if isinstance(out, list) and all(isinstance(i, int) for i in out):
        return out + ids
    if hasattr(out, "keys") and "input_ids" in out and isinstance(out["input_ids"], list) and all(isinstance(i, int) for i in out["input_ids"]):
        out["input_ids"] = out["input_ids"] + ids
        for key in ("attention_mask", "assistant_masks"):
            if key in out:
                out[key] = list(out[key]) + [1] * len(ids)
    return out  # tensors (return_tensors) are left as rendered


def chat_templates(tokenizer):
    """The default chat template and the tool_use one (None where the tokenizer has none)."""
    t = tokenizer.chat_template
    if isinstance(t, dict):
        return t.get("default"), t.get("tool_use")
    return t, None


def tool_call_dialect(template):
    """tool-call-dialects.ts toolCallDialect: the first family whose marks the template has."""
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if '"parameters": dictionary of argument name' in template:
        return "llama3"
    if "<|tool_call|>" in template and "tool_calls" not in template:
        return "granite3"
    if "<|observation|>" in template and "metadata" in template:
        return "glm4"
    if "message['tools']" in template and "<|tool|>" in template:
        return "phi4mini"
    if "<｜tool▁calls▁begin｜>" in template:
        return "deepseek"
    return "hermes"


def none_content_as_missing(template):
    """DeepSeek's tests of message["content"] is none, true of a content transformers dropped too."""
    if isinstance(template, dict):
        return {name: none_content_as_missing(t) for name, t in template.items()}
    if not isinstance(template, str):
        return template
    template = template.replace("message['content'] is not none", "(message['content'] is defined and message['content'] is not none)")
    return re.sub(r"message\['content'\] is none", "(message['content'] is not defined or message['content'] is none)", template)


def template_json(value):
    """template-context.ts templateJson: JSON as a template's tojson writes it."""
    return json.dumps(value, ensure_ascii=False)


def template_messages(messages, dialect, template, id_length, tools):
    """template-context.ts templateMessages, then the dialect's history rewrite."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        if isinstance(m.get("tool_calls"), list):
            m["tool_calls"] = [with_cut_id(with_parsed_arguments(c), id_length) for c in m["tool_calls"]]
        if id_length is not None and isinstance(m.get("tool_call_id"), str) and len(m["tool_call_id"]) > id_length:
            m["tool_call_id"] = m["tool_call_id"][-id_length:]
        out.append(m)
    if dialect == "granite3":
        return calls_in_content(out)
    if dialect == "glm4":
        return calls_as_metadata_turns(out)
    if dialect == "phi4mini":
        return tools_on_the_system_message(out, tools)
    if dialect == "deepseek":
        return calls_with_no_content(out, "object" if re.search(r"arguments'?\]?\s*\|\s*tojson", template) else "text")
    return out


def with_parsed_arguments(call):
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
        return call
    try:
        parsed = json.loads(fn["arguments"])
    except ValueError:
        return call  # not JSON: the template writes the text as it is
    return {**call, "function": {**fn, "arguments": parsed}}


def with_cut_id(call, id_length):
    if id_length is None or not isinstance(call, dict) or not isinstance(call.get("id"), str) or len(call["id"]) <= id_length:
        return call
    return {**call, "id": call["id"][-id_length:]}


def calls_of(m):
    return m["tool_calls"] if isinstance(m.get("tool_calls"), list) else []


def arguments_text(call):
    args = (call.get("function") or {}).get("arguments")
    return args if isinstance(args, str) else template_json(args if args is not None else {})


def rewrite_calls(messages, rewrite):
    """Each turn with calls as rewrite(turn, calls) writes it (a list of turns); the others as they are."""
    out = []
    for m in messages:
        calls = calls_of(m)
        out.extend(rewrite(m, calls) if calls else [m])
    return out


def calls_in_content(messages, close=""):
    """granite3 (and phi4mini, closed): each call list written after its turn's text."""
    def rewrite(m, calls):
        listed = [{"name": (c.get("function") or {}).get("name"), "arguments": (c.get("function") or {}).get("arguments", {})} for c in calls]
        rest = {k: v for k, v in m.items() if k != "tool_calls"}
        return [{**rest, "content": (m.get("content") or "") + "<|tool_call|>" + template_json(listed) + close}]
    return rewrite_calls(messages, rewrite)


def tools_on_the_system_message(messages, tools):
    """phi4mini: the tools as a JSON string on the system message, each call list in its turn, closed."""
    with_calls = calls_in_content(messages, "<|/tool_call|>")
    functions = [t["function"] if isinstance(t, dict) and "function" in t else t for t in (tools or [])]
    if not functions:
        return with_calls
    listed = template_json(functions)
    if with_calls and with_calls[0].get("role") == "system":
        return [{**with_calls[0], "tools": listed}] + with_calls[1:]
    return [{"role": "system", "content": "", "tools": listed}] + with_calls


def calls_with_no_content(messages, form):
    """deepseek: a turn's calls, with no content where it has no text (transformers then drops the key)."""
    def rewrite(m, calls):
        if form == "text":
            calls = [{**c, "function": {**(c.get("function") or {}), "arguments": arguments_text(c)}} for c in calls]
        rest = {k: v for k, v in m.items() if k != "content" or not isinstance(v, str) or v.strip()}
        return [{**rest, "tool_calls": calls}]
    return rewrite_calls(messages, rewrite)


def calls_as_metadata_turns(messages):
    """glm4: a turn's text, then a turn per call {metadata: name, content: arguments}; a tool's result an observation."""
    def rewrite(m, calls):
        text = [{"role": "assistant", "content": m["content"]}] if (m.get("content") or "").strip() else []
        return text + [{"role": "assistant", "metadata": str((c.get("function") or {}).get("name") or ""), "content": arguments_text(c)} for c in calls]
    observed = [{"role": "observation", "content": m.get("content")} if m.get("role") == "tool" else m for m in messages]
    return rewrite_calls(observed, rewrite)
`;

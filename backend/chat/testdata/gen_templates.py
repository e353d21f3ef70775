#!/usr/bin/env python3
"""Regenerates templates.golden.jsonl: each template in templates/ rendered
for each conversation in conversations.json by Python's Jinja2, configured
as Hugging Face's apply_chat_template configures it, with the messages as
jspark's chat package passes them (prepare: content always a string, as
llama.cpp passes it; tool-call arguments parsed from JSON text, as vLLM
does; gpt-oss's harmony template gets reasoning as "thinking", as llama.cpp
adjusts it; tools left undefined when a request has none, as llama.cpp
does).
The environment is Jinja2's mutable sandbox, not Hugging Face's immutable
one: Kimi-K2's templates append to a list, which llama.cpp's engine and
jspark's allow. Run by hand: python3 gen_templates.py"""
import datetime, json, os
import jinja2, jinja2.ext
from jinja2.sandbox import SandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = datetime.datetime(2026, 1, 15, 9, 30, 0)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)

env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: NOW.strftime(f)

def prepare(msgs, harmony):
    """The messages as chat.messageValue builds them, keys in its order."""
    out = []
    for m in msgs:
        d = {"role": m["role"]}
        d["content"] = m.get("content") or ""
        calls = m.get("tool_calls") or []
        if m.get("name"):
            d["name"] = m["name"]
        if calls:
            d["tool_calls"] = []
            for c in calls:
                tc = {}
                if c.get("id"):
                    tc["id"] = c["id"]
                tc["type"] = c.get("type") or "function"
                args = c["function"]["arguments"]
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
                tc["function"] = {"name": c["function"]["name"], "arguments": args}
                d["tool_calls"].append(tc)
        if m.get("tool_call_id"):
            d["tool_call_id"] = m["tool_call_id"]
        if m.get("reasoning_content"):
            d["reasoning_content"] = m["reasoning_content"]
            if harmony:
                # llama.cpp: the template reads reasoning as "thinking",
                # and a turn cannot carry both it and content with calls.
                d["thinking"] = m["reasoning_content"]
                if calls:
                    del d["content"]
        if harmony and len(calls) > 1:
            # One turn a call, as vLLM hands them to harmony.
            for i, tc in enumerate(d["tool_calls"]):
                turn = dict(d) if i == 0 else {"role": d["role"], "content": ""}
                turn["tool_calls"] = [tc]
                out.append(turn)
            continue
        out.append(d)
    return out

convs = json.load(open(os.path.join(HERE, "conversations.json"), encoding="utf-8"))
tdir = os.path.join(HERE, "templates")
with open(os.path.join(HERE, "templates.golden.jsonl"), "w", encoding="utf-8") as f:
    for t in sorted(n for n in os.listdir(tdir) if n.endswith(".jinja")):
        src = open(os.path.join(tdir, t), encoding="utf-8").read()
        for c in convs:
            vars = dict(c.get("kwargs", {}))  # a request's chat_template_kwargs
            vars.update({"messages": prepare(c["messages"], "<|channel|>" in src), "add_generation_prompt": c["add_generation_prompt"],
                         "bos_token": "<s>", "eos_token": "</s>"})
            if c.get("tools"):
                vars["tools"] = c["tools"]
            r = {"template": t, "conversation": c["name"]}
            try:
                r["output"] = env.from_string(src).render(**vars)
            except Exception as ex:
                r["error"] = type(ex).__name__ + ": " + str(ex)
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")

#!/usr/bin/env python3
"""Regenerates templates.golden.jsonl: each template in templates/ rendered
for each conversation in conversations.json by Python's Jinja2, configured
as Hugging Face's apply_chat_template configures it, with the messages as
vLLM passes them (tool-call arguments parsed from JSON text; tools left
undefined when a request has none, as llama.cpp does). Run by hand."""
import datetime, json, os
import jinja2, jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = datetime.datetime(2026, 1, 15, 9, 30, 0)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: NOW.strftime(f)

def prepare(msgs):
    out = []
    for m in msgs:
        m = json.loads(json.dumps(m))
        for c in m.get("tool_calls", []):
            try:
                c["function"]["arguments"] = json.loads(c["function"]["arguments"])
            except ValueError:
                pass
        out.append(m)
    return out

convs = json.load(open(os.path.join(HERE, "conversations.json"), encoding="utf-8"))
tdir = os.path.join(HERE, "templates")
with open(os.path.join(HERE, "templates.golden.jsonl"), "w", encoding="utf-8") as f:
    for t in sorted(n for n in os.listdir(tdir) if n.endswith(".jinja")):
        src = open(os.path.join(tdir, t), encoding="utf-8").read()
        for c in convs:
            vars = dict(c.get("kwargs", {}))  # a request's chat_template_kwargs
            vars.update({"messages": prepare(c["messages"]), "add_generation_prompt": c["add_generation_prompt"],
                         "bos_token": "<s>", "eos_token": "</s>"})
            if c.get("tools"):
                vars["tools"] = c["tools"]
            r = {"template": t, "conversation": c["name"]}
            try:
                r["output"] = env.from_string(src).render(**vars)
            except Exception as ex:
                r["error"] = type(ex).__name__ + ": " + str(ex)
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")

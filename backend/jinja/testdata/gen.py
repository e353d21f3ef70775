#!/usr/bin/env python3
"""Regenerates snippets.golden.jsonl from Python's Jinja2, configured as Hugging
Face's apply_chat_template configures it. Run by hand: python3 gen.py"""
import datetime, json, os, sys
import jinja2, jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = datetime.datetime(2026, 1, 15, 9, 30, 0)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)

def env(cls):
    e = cls(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = lambda f: NOW.strftime(f)
    return e

def render(e, src, vars):
    try:
        return {"output": e.from_string(src).render(**vars)}
    except Exception as ex:
        return {"error": type(ex).__name__ + ": " + str(ex)}

def snippets():
    e = env(SandboxedEnvironment)  # lists may be appended to here
    text = open(os.path.join(HERE, "snippets.txt"), encoding="utf-8").read()
    out = []
    for block in text.split("=== ")[1:]:
        name, _, body = block.partition("\n")
        body = body[:-1] if body.endswith("\n") else body
        vars = {}
        lines = body.split("\n")
        if lines and lines[-1].startswith("{\""):
            vars = json.loads(lines[-1])
            body = "\n".join(lines[:-1])
        r = render(e, body, vars)
        r["name"] = name.strip()
        out.append(r)
    with open(os.path.join(HERE, "snippets.golden.jsonl"), "w", encoding="utf-8") as f:
        for r in out:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")

snippets()


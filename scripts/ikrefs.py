"""Shared by scripts/record-*-refs.py: synthesize each model with `jspark
model synth`, serve it with ik_llama.cpp's llama-server on loopback and
record its greedy continuations of the prompts, with the top 5
log-probabilities at each position, into testdata/refs/<prefix>-<name>.jsonl.

The server runs one slot on 2 threads with its defaults otherwise: flash
attention over an F16 KV cache, all its CPU backend offers (an F32 V cache
needs flash attention, which has no F32 cache); recurrent states stay F32;
no prompt cache. A record's synth flags are the model's (same flags, same
bytes: the tests synthesize it again and check its sha256).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_PREDICT = 32


def ids_of(text):
    """BOS, then one byte token per byte (the synthetic vocabulary's)."""
    return [1] + [3 + b for b in text.encode()]


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        sys.exit(f"{url}: {e.code} {e.read().decode(errors='replace')}")


def record(server, prefix, port, shape, models, prompts, request, extra):
    """Records every model of models (name: synth flags after shape).
    request: fields added to each /v1/completions body; extra: fields
    added to each record."""
    out_dir = os.path.join(ROOT, "testdata", "refs")
    tmp = tempfile.mkdtemp()
    jspark = os.path.join(tmp, "jspark")
    subprocess.run(["go", "build", "-o", jspark, "./cmd/jspark"], cwd=ROOT, check=True)
    for i, (name, flags) in enumerate(models.items()):
        path = os.path.join(tmp, name + ".gguf")
        synth = ["model", "synth", *shape, *flags, "--out", path]
        subprocess.run([jspark, *synth], check=True, stdout=subprocess.DEVNULL)
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        proc = subprocess.Popen([server, "-m", path, "--host", "127.0.0.1", "--port", str(port + i), "-c", "1024",
                                 "-np", "1", "-t", "2"],
                                stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, name + ".log"), "w"))
        try:
            base = f"http://127.0.0.1:{port + i}"
            for _ in range(600):
                if proc.poll() is not None:
                    sys.exit(f"{name}: llama-server exited {proc.returncode}; see {tmp}/{name}.log")
                try:
                    with urllib.request.urlopen(base + "/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except Exception:
                    time.sleep(0.2)
            lines = []
            for text in prompts:
                ids = ids_of(text)
                r = post(base + "/v1/completions", {"prompt": ids, "max_tokens": N_PREDICT, "temperature": 0, "top_k": 1,
                                                    "cache_prompt": False, "ignore_eos": True, **request})
                if r["usage"]["prompt_tokens"] != len(ids):
                    sys.exit(f"{name}: ik read {r['usage']['prompt_tokens']} prompt tokens of {len(ids)}")
                probs = r["choices"][0]["logprobs"]["content"]
                if len(probs) != N_PREDICT:
                    sys.exit(f"{name}: {len(probs)} tokens of {N_PREDICT}")
                lines.append({
                    "model": name, "synth": synth[2:-2], "sha256": sha, "prompt": text, "prompt_ids": ids, **extra,
                    "gen_ids": [p["id"] for p in probs],
                    "top5": [[[q["id"], q["logprob"]] for q in p["top_logprobs"]] for p in probs],
                })
            with open(os.path.join(out_dir, f"{prefix}-{name}.jsonl"), "w") as f:
                for line in lines:
                    f.write(json.dumps(line) + "\n")
            print(f"{name}: {len(lines)} prompts")
        finally:
            proc.terminate()
            proc.wait()
    shutil.rmtree(tmp)  # kept when a server failed: its log is there

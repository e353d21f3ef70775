#!/usr/bin/env python3
"""Record ik_llama.cpp's greedy ids and top-5 log-probabilities on jspark's
synthetic sliding-window and hybrid recurrent models (gemma3, qwen35,
qwen35moe, qwen3next: testdata/refs/hybrid-*.jsonl), which backend/model's
TestHybridMatchesIkLlama compares against. The tests never run this script
and need no peer.

usage: scripts/record-hybrid-refs.py PATH/TO/llama-server

For each model below it writes the file with `jspark model synth` (same
flags, same bytes: the test synthesizes it again and checks its sha256;
--vocab-text, as the server's JSON refuses the invalid UTF-8 a random
model's byte tokens make), serves it with the given llama-server on
loopback (one slot, 2 threads, its defaults otherwise: flash attention
over an F16 KV cache, all its CPU backend offers, as an F32 V cache needs
flash attention, which has no F32 cache; the recurrent states stay F32; no
prompt cache), and asks /v1/completions for 32 greedy tokens of each
prompt (token ids, EOS ignored) with n_probs 5 (log-probabilities of the
raw logits, before sampling).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = ["--heads", "4", "--kv-heads", "2", "--vocab-text", "--ctx", "1024"]
MODELS = {
    # F32: ids must equal ours (near-ties excepted). gemma3's six layers
    # are five sliding ones of a 48-token window and a global one; the
    # DeltaNet families' eight are three recurrent, one full, twice. Heads
    # of 64: ik_llama.cpp's delta rule has kernels for 64 and 128 only (its
    # fallback reads the values as if laid out head by head, which they
    # are not).
    "gemma3-f32": ["--arch", "gemma3", "--layers", "6", "--dim", "256", "--ff", "512", "--type", "f32", "--seed", "31",
                   "--sliding-window", "48"],
    "qwen35-f32": ["--arch", "qwen35", "--layers", "8", "--dim", "256", "--ff", "512", "--type", "f32", "--seed", "32"],
    "qwen35moe-f32": ["--arch", "qwen35moe", "--layers", "8", "--dim", "256", "--ff", "512", "--type", "f32", "--seed", "33"],
    "qwen3next-f32": ["--arch", "qwen3next", "--layers", "8", "--dim", "256", "--ff", "512", "--type", "f32", "--seed", "34"],
    # Quantized: log-probabilities teacher-forced along ik's ids.
    "gemma3-q4_k": ["--arch", "gemma3", "--layers", "6", "--dim", "256", "--ff", "512", "--type", "q4_k", "--seed", "41",
                    "--sliding-window", "48"],
    "qwen35-q4_k": ["--arch", "qwen35", "--layers", "4", "--dim", "256", "--ff", "512", "--type", "q4_k", "--seed", "42"],
    "qwen35moe-q4_k": ["--arch", "qwen35moe", "--layers", "4", "--dim", "256", "--ff", "512", "--type", "q4_k", "--seed", "43"],
    "qwen3next-q4_k": ["--arch", "qwen3next", "--layers", "4", "--dim", "256", "--ff", "512", "--type", "q4_k", "--seed", "44"],
}
PROMPTS = [
    "Once upon a time",
    "The quick brown fox jumps over the lazy dog, and then",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint(",
    "A recurrent layer keeps a state of fixed size for each sequence: a short convolution's last inputs "
    "and one matrix per head, which every token decays, corrects by the delta rule and reads.",
]
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


def main():
    server = sys.argv[1]
    out_dir = os.path.join(ROOT, "testdata", "refs")
    tmp = tempfile.mkdtemp()
    jspark = os.path.join(tmp, "jspark")
    subprocess.run(["go", "build", "-o", jspark, "./cmd/jspark"], cwd=ROOT, check=True)
    for name, flags in MODELS.items():
        path = os.path.join(tmp, name + ".gguf")
        synth = ["model", "synth", *SHAPE, *flags, "--out", path]
        subprocess.run([jspark, *synth], check=True, stdout=subprocess.DEVNULL)
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        port = 18720 + list(MODELS).index(name)
        proc = subprocess.Popen([server, "-m", path, "--host", "127.0.0.1", "--port", str(port), "-c", "1024",
                                 "-np", "1", "-t", "2"],
                                stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, name + ".log"), "w"))
        try:
            base = f"http://127.0.0.1:{port}"
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
            for text in PROMPTS:
                ids = ids_of(text)
                r = post(base + "/v1/completions", {"prompt": ids, "max_tokens": N_PREDICT, "temperature": 0, "top_k": 1,
                                                    "n_probs": 5, "cache_prompt": False, "ignore_eos": True})
                probs = r["choices"][0]["logprobs"]["content"]
                if len(probs) != N_PREDICT:
                    sys.exit(f"{name}: {len(probs)} tokens of {N_PREDICT}")
                lines.append({
                    "model": name, "synth": synth[2:-2], "sha256": sha, "prompt": text, "prompt_ids": ids,
                    "gen_ids": [p["id"] for p in probs],
                    "top5": [[[q["id"], q["logprob"]] for q in p["top_logprobs"]] for p in probs],
                })
            with open(os.path.join(out_dir, f"hybrid-{name}.jsonl"), "w") as f:
                for line in lines:
                    f.write(json.dumps(line) + "\n")
            print(f"{name}: {len(lines)} prompts")
        finally:
            proc.terminate()
            proc.wait()
    shutil.rmtree(tmp)  # kept when a server failed: its log is there


if __name__ == "__main__":
    main()

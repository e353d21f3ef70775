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
import sys

import ikrefs

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


def main():
    ikrefs.record(sys.argv[1], "hybrid", 18720, SHAPE, MODELS, PROMPTS, {"n_probs": 5}, {})


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Record ik_llama.cpp's greedy ids and top-5 log-probabilities on jspark's
synthetic mixture-of-experts models (testdata/refs/moe-*.jsonl), which
backend/model's TestMoEMatchesIkLlama compares against. The tests never run
this script and need no peer.

usage: scripts/record-moe-refs.py PATH/TO/llama-server

For each model below it writes the file with `jspark model synth` (same
flags, same bytes: the test synthesizes it again and checks its sha256),
serves it with the given llama-server on loopback (one slot, 2 threads,
its defaults otherwise: flash attention over an F16 KV cache, which is all
its CPU backend offers: an F32 V cache needs flash attention, which has no
F32 cache; no prompt cache), and asks /v1/completions for 32 greedy
tokens of each prompt (token ids, EOS ignored) with logprobs 5.

NOTE: ik's server reports log-probabilities of the logits after the
request's logit biases (ignore_eos and the ban below set them to -inf in
place), normalised by the sum of every probability plus, a second time,
those beyond the top n_probs (get_token_probabilities in
examples/server/server-common.cpp adds the tail twice): the test computes
ours the same way (measured: within 5e-4 nats on the F32 files).
"""
import sys

import ikrefs

ALL4 = ["--experts", "4", "--experts-used", "4"]
SHAPE = ["--layers", "3", "--heads", "4", "--kv-heads", "2", "--vocab-bytes", "--ctx", "1024"]
MODELS = {
    # F32: ids must equal ours (near-ties excepted).
    "qwen3moe-f32": ["--arch", "qwen3moe", "--dim", "128", "--ff", "256", "--type", "f32", "--seed", "11"],
    "glm4moe-f32": ["--arch", "glm4moe", "--dim", "128", "--ff", "256", "--type", "f32", "--seed", "12"],
    "gpt-oss-f32": ["--arch", "gpt-oss", "--dim", "128", "--ff", "256", "--type", "f32", "--seed", "13", "--sliding-window", "48"],
    # Quantized: log-probabilities teacher-forced along ik's ids, every
    # expert used (see TestMoEMatchesIkLlama: a choice of experts is a
    # discontinuity that 8-bit activations cross).
    "qwen3moe-q4_k": ["--arch", "qwen3moe", "--dim", "256", "--ff", "512", "--type", "q4_k", "--seed", "21", *ALL4],
    "glm4moe-q4_k": ["--arch", "glm4moe", "--dim", "256", "--ff", "512", "--type", "q4_k", "--seed", "22", *ALL4],
    "gpt-oss-q4_k": ["--arch", "gpt-oss", "--dim", "256", "--ff", "512", "--type", "q4_k", "--seed", "23", "--sliding-window", "48", *ALL4],
    "gpt-oss-q8_0": ["--arch", "gpt-oss", "--dim", "256", "--ff", "512", "--type", "q8_0", "--seed", "24", "--sliding-window", "48", *ALL4],
}
PROMPTS = [
    "Once upon a time",
    "The quick brown fox jumps over the lazy dog, and then",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint(",
    "In the mixture of experts each token is routed to a few of many feed-forward networks; "
    "the router scores every expert, keeps the best, and weighs their outputs.",
]
# The continuation never takes a byte token of 0x80-0xff: the server cannot
# put a lone one into its JSON (nlohmann refuses invalid UTF-8). The bias
# acts in sampling only; the log-probabilities are of the raw logits.
HIGH_BYTES_BANNED = [[3 + b, False] for b in range(0x80, 0x100)]
EOS = 2


def main():
    ikrefs.record(sys.argv[1], "moe", 18700, SHAPE, MODELS, PROMPTS,
                  {"logprobs": 5, "logit_bias": HIGH_BYTES_BANNED},
                  # what ik's reported log-probabilities leave out: EOS (ignore_eos) and the banned bytes
                  {"banned": [EOS] + [b[0] for b in HIGH_BYTES_BANNED]})


if __name__ == "__main__":
    main()

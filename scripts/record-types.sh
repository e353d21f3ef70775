#!/usr/bin/env bash
# record-types.sh: ik_llama.cpp's greedy continuations and top-5 log-probabilities
# on synthetic llama models in every weight type and mix, recorded into
# testdata/refs/types-ik.jsonl for backend/model's TestTypesAgainstPeer (which
# needs no peer: it rebuilds the same models, same flags same bytes). Each
# quantized model runs twice: as written ("quantized": ik's kernels, activations
# quantized to 8 bits), and converted to F32 by ik's own llama-quantize
# ("dequantized": the weights as ik decodes them, computed in float).
#
#   scripts/record-types.sh /path/to/llama-server   (env: JSPARK, DIR, TYPES,
#                                                    QUANTIZE: llama-quantize beside the server)
#
# Each model: `jspark model synth --arch llama --layers 4 --dim 256 --heads 8
# --kv-heads 2 --ff 768 --vocab-bytes --type T --seed 11`. llama-server runs it on
# one thread, 4 prompts given as token ids (no tokenizer in between), /completion
# with temperature 0, 32 tokens, n_probs 5, no prompt cache, bytes 0x80-0xFF never
# sampled (the server cannot encode them alone in JSON). One JSON object a line:
# type, peer, prompt_ids, gen_ids, top5 (per generated position: [[id, logprob] x5], the
# natural log of the probabilities ik's server reports, pieces mapped back to ids),
# banned ([from, to): the ids biased out, whose probabilities are 0).
set -euo pipefail

SERVER=${1:-${LLAMA_SERVER:-}}
if [[ -z "$SERVER" || ! -x "$SERVER" ]]; then
	echo "usage: $0 /path/to/llama-server" >&2
	exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DIR:-${TMPDIR:-/tmp}/jspark-record-types}
TYPES=${TYPES:-"f32 q4_1 q5_0 q5_1 q2_k q3_k q5_k iq4_nl iq4_xs mxfp4 q4_k_m q5_k_m q3_k_m"}
OUT=$ROOT/testdata/refs/types-ik.jsonl
mkdir -p "$DIR"
if [[ -z "${JSPARK:-}" ]]; then
	JSPARK="$DIR/jspark"
	(cd "$ROOT" && go build -o "$JSPARK" ./cmd/jspark)
fi
PORT=${PORT:-18431}
QUANTIZE=${QUANTIZE:-$(dirname "$SERVER")/llama-quantize}

# record TYPE PEER FILE: ik's continuations of FILE, tagged type and peer.
record() {
	if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
		echo "record-types: something already answers on port $PORT (set PORT)" >&2
		exit 1
	fi
	"$SERVER" -m "$3" -t 1 -c 512 --port "$PORT" >"$DIR/server-$1-$2.log" 2>&1 &
	pid=$!
	trap 'kill "$pid" 2>/dev/null' EXIT
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
		sleep 0.2
	done
	python3 - "$1" "$2" "$PORT" >>"$OUT.tmp" <<'PY'
import json, math, sys, urllib.request
typ, peer, port = sys.argv[1], sys.argv[2], sys.argv[3]

def byte_id(piece):
    """The id of a piece of the byte vocabulary (<unk> <s> </s>, then <0x00>…<0xFF>)."""
    special = {"<unk>": 0, "<s>": 1, "</s>": 2}
    if piece in special:
        return special[piece]
    if piece.startswith("byte: \\x"):
        return 3 + int(piece[8:10], 16)
    b = piece.encode("utf-8")
    if len(b) != 1:
        raise SystemExit(f"record-types: piece {piece!r} is not one byte")
    return 3 + b[0]
prompts = [
    [1, 75, 104, 111, 111, 114, 35, 122, 114, 117, 111, 103],        # "Hello world"
    [1, 87, 107, 104, 35, 116, 120, 108, 102, 110],                  # "The quick"
    [1, 52, 53, 54, 55, 56, 57, 58, 59, 60],                         # digits
    [1, 103, 104, 105, 35, 105, 108, 101, 43, 113, 44, 61, 13],      # "def fib(n):\n"
]
for ids in prompts:
    # Bytes 0x80-0xFF (ids 131-258) are never sampled: alone they are not
    # UTF-8, and the server fails to encode a text holding one. The bias
    # applies before the probabilities: they are of the other tokens.
    body = {"prompt": ids, "n_predict": 32, "temperature": 0, "n_probs": 5, "cache_prompt": False,
            "logit_bias": [[i, False] for i in range(131, 259)]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=120))
    gen, top5 = [], []
    for step in r["completion_probabilities"]:
        if "top_logprobs" in step:  # newer servers: ids and logprobs
            gen.append(step["id"])
            top5.append([[p["id"], p["logprob"]] for p in step["top_logprobs"][:5]])
            continue
        # ik_llama.cpp: each step's piece and the 5 likeliest pieces with
        # their probabilities (see the test for how it normalises them)
        gen.append(byte_id(step["content"]))
        top5.append([[byte_id(p["tok_str"]), math.log(p["prob"])] for p in step["probs"][:5]])
    print(json.dumps({"type": typ, "peer": peer, "prompt_ids": ids, "gen_ids": gen, "top5": top5,
                      "banned": [131, 259]}))
PY
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	trap - EXIT
}

: >"$OUT.tmp"
for t in $TYPES; do
	model="$DIR/llama-$t.gguf"
	"$JSPARK" model synth --arch llama --layers 4 --dim 256 --heads 8 --kv-heads 2 --ff 768 \
		--vocab-bytes --type "$t" --seed 11 --out "$model" >/dev/null
	record "$t" quantized "$model"
	if [[ $t != f32 ]]; then
		# the same weights as ik's own dequantization writes them
		"$QUANTIZE" --allow-requantize "$model" "$DIR/llama-$t.dequantized.gguf" F32 >"$DIR/quantize-$t.log" 2>&1
		record "$t" dequantized "$DIR/llama-$t.dequantized.gguf"
	fi
done
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"

#!/usr/bin/env bash
# record-types.sh: ik_llama.cpp's greedy continuations and top-5 log-probabilities
# on synthetic llama models in every weight type and mix, recorded into
# testdata/refs/types-ik.jsonl for backend/model's TestTypesAgainstPeer (which
# needs no peer: it rebuilds the same models, same flags same bytes).
#
#   scripts/record-types.sh /path/to/llama-server   (env: JSPARK, DIR, TYPES)
#
# Each model: `jspark model synth --arch llama --layers 4 --dim 256 --heads 8
# --kv-heads 2 --ff 768 --vocab-bytes --type T --seed 11`. llama-server runs it on
# one thread, 4 prompts given as token ids (no tokenizer in between), /completion
# with temperature 0, 32 tokens, n_probs 5, no prompt cache. One JSON object a line:
# type, prompt_ids, gen_ids, top5 (per generated position: [[id, logprob] x5]).
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
: >"$OUT.tmp"
for t in $TYPES; do
	model="$DIR/llama-$t.gguf"
	"$JSPARK" model synth --arch llama --layers 4 --dim 256 --heads 8 --kv-heads 2 --ff 768 \
		--vocab-bytes --type "$t" --seed 11 --out "$model" >/dev/null
	"$SERVER" -m "$model" -t 1 -c 512 --port "$PORT" >"$DIR/server-$t.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
		sleep 0.2
	done
	python3 - "$t" "$PORT" >>"$OUT.tmp" <<'PY'
import json, sys, urllib.request
typ, port = sys.argv[1], sys.argv[2]
prompts = [
    [1, 75, 104, 111, 111, 114, 35, 122, 114, 117, 111, 103],        # "Hello world"
    [1, 87, 107, 104, 35, 116, 120, 108, 102, 110],                  # "The quick"
    [1, 52, 53, 54, 55, 56, 57, 58, 59, 60],                         # digits
    [1, 103, 104, 105, 35, 105, 108, 101, 43, 113, 44, 61, 13],      # "def fib(n):\n"
]
for ids in prompts:
    body = {"prompt": ids, "n_predict": 32, "temperature": 0, "top_k": 1, "n_probs": 5,
            "cache_prompt": False, "samplers": ["top_k"]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=120))
    gen, top5 = [], []
    for step in r["completion_probabilities"]:
        if "top_logprobs" in step:  # newer servers: logprobs of the raw distribution
            gen.append(step["id"])
            top5.append([[p["id"], p["logprob"]] for p in step["top_logprobs"][:5]])
        else:
            raise SystemExit("record-types: this server's n_probs format is not known: " + json.dumps(step)[:300])
    print(json.dumps({"type": typ, "prompt_ids": ids, "gen_ids": gen, "top5": top5}))
PY
	kill "$pid"
	wait "$pid" 2>/dev/null || true
done
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"

#!/usr/bin/env bash
# bench-peer.sh: jspark's CPU prefill and decode against llama.cpp's
# llama-bench on the same synthetic GGUF files, printed as a Markdown table.
#
#   make bench-peer LLAMA_BENCH=/path/to/llama-bench
#   scripts/bench-peer.sh /path/to/llama-bench   (env: MODELS, TYPES, REPEATS, THREADS, DIR,
#                                                KV_TYPE, JSPARK: a jspark binary to use instead of building one)
#
# Models are written by `jspark model synth` (llama, the 32000-token SPM vocabulary
# from testdata/vocab): 40m = 12 layers, dim 512, 8 heads, ff 1536; 110m = 12 layers,
# dim 768, 12 heads, ff 2048. Each repeat runs llama-bench (-p 512 -n 128, one
# repetition) and then jspark, alternating, so both see the same machine load; the
# table shows medians. jspark's prefill is a ~512-token prompt with one output token;
# its decode is 128 greedy tokens after a one-word prompt (llama-bench's tg128 also
# decodes from an empty context). llama.cpp keeps K/V in F16 by default; set
# KV_TYPE=f16 to match.
set -euo pipefail

LLAMA_BENCH=${1:-${LLAMA_BENCH:-}}
if [[ -z "$LLAMA_BENCH" || ! -x "$LLAMA_BENCH" ]]; then
	echo "usage: $0 /path/to/llama-bench (or LLAMA_BENCH=...)" >&2
	exit 2
fi
MODELS=${MODELS:-"40m 110m"}
TYPES=${TYPES:-"f32 f16 q8_0 q4_k"}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
KV_TYPE=${KV_TYPE:-f32}
DIR=${DIR:-${TMPDIR:-/tmp}/jspark-bench-peer}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DIR"
if [[ -z "${JSPARK:-}" ]]; then
	JSPARK="$DIR/jspark"
	(cd "$ROOT" && go build -o "$JSPARK" ./cmd/jspark)
fi

shape() {
	case $1 in
	40m) echo "--layers 12 --dim 512 --heads 8 --ff 1536" ;;
	110m) echo "--layers 12 --dim 768 --heads 12 --ff 2048" ;;
	*) echo "unknown model $1 (want 40m or 110m)" >&2; exit 2 ;;
	esac
}

# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# llama_ts FILE N_PROMPT N_GEN: avg_ts of that test from llama-bench's CSV
llama_ts() {
	awk -F, -v p="$2" -v g="$3" 'NR==1 {for (i=1;i<=NF;i++) c[$i]=i; next}
		{gsub(/"/, "")} $c["n_prompt"]==p && $c["n_gen"]==g {print $c["avg_ts"]}' "$1"
}

json_field() { grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; }

PROMPT=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 42))

echo "| model | llama.cpp pp512 | jspark prefill | ratio | llama.cpp tg128 | jspark decode | ratio |"
echo "|---|---|---|---|---|---|---|"
for size in $MODELS; do
	for type in $TYPES; do
		model="$DIR/$size-$type.gguf"
		if [[ ! -s "$model" ]]; then
			# shellcheck disable=SC2046
			"$JSPARK" model synth $(shape "$size") --type "$type" \
				--vocab-from "$ROOT/testdata/vocab/ggml-vocab-llama-spm.gguf" --out "$model" >/dev/null
		fi
		: >"$DIR/lpp" ; : >"$DIR/ltg" ; : >"$DIR/jpp" ; : >"$DIR/jtg"
		ptoks=0
		for _ in $(seq "$REPEATS"); do
			"$LLAMA_BENCH" -m "$model" -t "$THREADS" -p 512 -n 128 -r 1 -o csv >"$DIR/llama.csv" 2>/dev/null
			llama_ts "$DIR/llama.csv" 512 0 >>"$DIR/lpp"
			llama_ts "$DIR/llama.csv" 0 128 >>"$DIR/ltg"
			out=$("$JSPARK" generate --model "$model" --threads "$THREADS" --kv-type "$KV_TYPE" --prompt "$PROMPT" --max-tokens 1 --format json)
			echo "$out" | json_field prefill_tok_s >>"$DIR/jpp"
			ptoks=$(echo "$out" | json_field prompt_tokens)
			"$JSPARK" generate --model "$model" --threads "$THREADS" --kv-type "$KV_TYPE" --prompt "The" --max-tokens 128 --format json |
				json_field decode_tok_s >>"$DIR/jtg"
		done
		lpp=$(median <"$DIR/lpp"); ltg=$(median <"$DIR/ltg")
		jpp=$(median <"$DIR/jpp"); jtg=$(median <"$DIR/jtg")
		awk -v m="$size $type" -v a="$lpp" -v b="$jpp" -v c="$ltg" -v d="$jtg" \
			'BEGIN {printf "| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f |\n", m, a, b, b/a, c, d, d/c}'
	done
done
echo
echo "(tok/s, medians of $REPEATS alternating runs, $THREADS threads, jspark KV $KV_TYPE, jspark prompt $ptoks tokens; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"

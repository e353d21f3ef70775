#!/usr/bin/env bash
# bench-peer.sh: jspark's CPU prefill and decode against a llama.cpp peer's
# llama-bench on the same synthetic GGUF files, alternating runs, medians,
# printed as Markdown tables (ratios are jspark / peer: above 1 is faster).
#
#   make bench-peer LLAMA_BENCH=/path/to/llama-bench [PEER=ik] [LLAMA_BENCH_AVX2=...] [PARTS="dense long avx2 moe"]
#   scripts/bench-peer.sh /path/to/llama-bench
#
# Knobs (environment):
#   PEER        ik (ik_llama.cpp: -rtr 1 -thp 1 -fa 1, F16 K/V, its best CPU settings) or
#               llama (mainline llama.cpp: -fa 1, F16 K/V); PEER_FLAGS overrides the flags.
#   PARTS       which tables: dense (pp512 and tg128 per model and type), long (tg128 after a
#               prompt of each DEPTHS), avx2 (jspark under JSPARK_ISA=avx2 against LLAMA_BENCH_AVX2, a
#               peer built without AVX-512), moe (the MoE shapes below). Default: dense long avx2 moe.
#   MODELS      dense shapes: 40m 110m 1b 8b (default "1b 8b"); TYPES: weight types or mixes
#               (default "q4_k_m q8_0"). LONG_MODELS (default 1b), DEPTHS (default "8192 32768"),
#               AVX2_MODELS (default 1b), MOE_MODELS (default "qwen3moe-30b gptoss-20b"), AVX2_ISA
#               (jspark's ISA in the avx2 part: avx2, the default, or avxvnni).
#   REPEATS (3), THREADS (2), KV_TYPE (jspark's K/V type, default f16 as the peer's), DIR (models
#   and scratch; ~40 GB with every part), JSPARK (a jspark binary instead of building one).
#
# Shapes (llama unless said; `jspark model synth`, the 32000-token SPM vocabulary of
# testdata/vocab): 40m = 12 layers, dim 512, 8 heads, ff 1536; 110m = 12, 768, 12, 2048;
# 1b = 16 layers, dim 2048, 32 query / 8 KV heads, ff 5632; 8b = 32, 4096, 32/8, 14336;
# qwen3moe-30b = Qwen3-Coder-30B-A3B's (48 layers, dim 2048, 32/4 heads of 128, 128 experts of
# ff 768, 8 used) in q4_k_m (~18 GB: run it alone); gptoss-20b = gpt-oss-20b's (24 layers, dim
# 2880, 64/8 heads of 64, 32 experts of ff 2880, 4 used, window 128) with MXFP4 experts.
#
# Each repeat runs llama-bench (one repetition) and then jspark, so both see the same load.
# jspark's prefill is a ~512-token prompt with one output token; its decode is 128 greedy
# tokens after a one-word prompt (llama-bench's tg128 decodes from an empty context), or after
# a prompt of the depth (llama-bench -gp DEPTH,128). Decode bandwidth is the weight bytes one
# token reads (every matrix but the token embedding; for a MoE only the experts used, on
# average) times tok/s, against BenchmarkReadBandwidth (read512 over 256 MiB, THREADS threads):
# for prefill/decode rows the median of one measurement just before each jspark decode run (the
# machine's read rate moves 30-68 GB/s from one minute to the next here), elsewhere the start's.
# Peak RSS is /usr/bin/time's maximum resident set, against the file's size.
#
# Time on 2 quiet cores, 3 repeats: dense 1b+8b ~45 min (plus writing the 8b files),
# long 1b ~50 min (the 32K prompts dominate), avx2 1b ~15 min, moe ~40 min plus writing the
# files once (synth streams in a few hundred MB of memory: the 8b files ~2.5 min of CPU each,
# Qwen3-Coder's Q4_K_M ~9, gpt-oss-20b's MXFP4 ~10; they stay in DIR for the next run). ik_llama.cpp's threads spin: on a loaded machine its numbers
# collapse (4 tok/s decode on the 40m shape at load 15), so run this alone.
set -euo pipefail

LLAMA_BENCH=${1:-${LLAMA_BENCH:-}}
if [[ -z "$LLAMA_BENCH" || ! -x "$LLAMA_BENCH" ]]; then
	echo "usage: $0 /path/to/llama-bench (or LLAMA_BENCH=...)" >&2
	exit 2
fi
PEER=${PEER:-ik}
case $PEER in
ik) PEER_FLAGS=${PEER_FLAGS:-"-rtr 1 -thp 1 -fa 1 -ctk f16 -ctv f16"} ;;
llama) PEER_FLAGS=${PEER_FLAGS:-"-fa 1 -ctk f16 -ctv f16"} ;;
*) echo "PEER=$PEER: want ik or llama" >&2; exit 2 ;;
esac
PARTS=${PARTS:-"dense long avx2 moe"}
AVX2_ISA=${AVX2_ISA:-avx2}
MODELS=${MODELS:-"1b 8b"}
TYPES=${TYPES:-"q4_k_m q8_0"}
LONG_MODELS=${LONG_MODELS:-1b}
DEPTHS=${DEPTHS:-"8192 32768"}
AVX2_MODELS=${AVX2_MODELS:-1b}
MOE_MODELS=${MOE_MODELS:-"qwen3moe-30b gptoss-20b"}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
KV_TYPE=${KV_TYPE:-f16}
DIR=${DIR:-${TMPDIR:-/tmp}/jspark-bench-peer}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VOCAB="$ROOT/testdata/vocab/ggml-vocab-llama-spm.gguf"
mkdir -p "$DIR"
if [[ -z "${JSPARK:-}" ]]; then
	JSPARK="$DIR/jspark"
	(cd "$ROOT" && go build -o "$JSPARK" ./cmd/jspark)
fi
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# shape NAME: the synth flags of a model shape
shape() {
	case $1 in
	40m) echo "--layers 12 --dim 512 --heads 8 --ff 1536" ;;
	110m) echo "--layers 12 --dim 768 --heads 12 --ff 2048" ;;
	1b) echo "--layers 16 --dim 2048 --heads 32 --kv-heads 8 --ff 5632" ;;
	8b) echo "--layers 32 --dim 4096 --heads 32 --kv-heads 8 --ff 14336" ;;
	qwen3moe-30b) echo "--arch qwen3moe --layers 48 --dim 2048 --heads 32 --kv-heads 4 --head-dim 128 --ff 6144 --experts 128 --experts-used 8 --expert-ff 768" ;;
	gptoss-20b) echo "--arch gpt-oss --layers 24 --dim 2880 --heads 64 --kv-heads 8 --head-dim 64 --ff 2880 --experts 32 --experts-used 4 --expert-ff 2880 --sliding-window 128" ;;
	*) echo "unknown model $1 (want 40m, 110m, 1b, 8b, qwen3moe-30b or gptoss-20b)" >&2; exit 2 ;;
	esac
}

# model NAME TYPE: the file's path, written once (a context past the longest depth)
model() {
	local f="$DIR/$1-$2.gguf"
	if [[ ! -s "$f" ]]; then
		# shellcheck disable=SC2046
		"$JSPARK" model synth $(shape "$1") --type "$2" --ctx 65536 --vocab-from "$VOCAB" --out "$f.tmp" >/dev/null
		mv "$f.tmp" "$f"
	fi
	echo "$f"
}

# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# peer_ts CSV TEST: avg_ts of that test (pp512, tg128, tg128@pp8192) from llama-bench's CSV
# (a CSV reader: some fields hold quoted commas)
peer_ts() {
	python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["test"] == sys.argv[2]: print(r["avg_ts"])' "$1" "$2"
}

json_field() { grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; }

# rss_kb FILE: the maximum resident set /usr/bin/time wrote
rss_kb() { tail -1 "$1"; }

# weight_bytes FILE: the bytes of weights one token reads: every tensor but the token
# embedding (a row of it is gathered), MoE expert tensors scaled by experts used / experts.
weight_bytes() {
	python3 - "$1" <<'EOF'
import struct, sys
f = open(sys.argv[1], 'rb')
def u(fmt):
    return struct.unpack('<' + fmt, f.read(struct.calcsize('<' + fmt)))[0]
def s():
    return f.read(u('Q')).decode()
SIZES = {0: 4, 1: 2, 24: 1, 25: 2, 26: 4, 27: 8, 28: 8, 30: 2}
# type: (block elements, block bytes)
BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 20: (32, 18),
          23: (256, 136), 39: (32, 17)}
def value(t):
    if t in (0, 1): return u('B' if t == 0 else 'b')
    if t in (2, 3): return u('H' if t == 2 else 'h')
    if t in (4, 5): return u('I' if t == 4 else 'i')
    if t == 6: return u('f')
    if t == 7: return u('?')
    if t == 8: return s()
    if t == 9:
        et, n = u('I'), u('Q')
        return [value(et) for _ in range(n)]
    if t in (10, 11): return u('Q' if t == 10 else 'q')
    if t == 12: return u('d')
    raise SystemExit('gguf value type %d' % t)
assert f.read(4) == b'GGUF'
u('I'); nt, nkv = u('Q'), u('Q')
kv = {}
for _ in range(nkv):
    k = s(); kv[k] = value(u('I'))
arch = kv['general.architecture']
used, total = kv.get(arch + '.expert_used_count', 0), kv.get(arch + '.expert_count', 0)
size = 0.0
for _ in range(nt):
    name = s(); dims = [u('Q') for _ in range(u('I'))]; t = u('I'); u('Q')
    elems = 1
    for d in dims: elems *= d
    be, bb = BLOCKS[t]
    b = elems // be * bb
    if name == 'token_embd.weight':
        continue
    if '_exps' in name and total:
        b = b * used / total
    size += b
print(int(size))
EOF
}

# read_bw [N]: the machine's read bandwidth as the kernels see it, GB/s (median of N, 3)
read_bw() {
	for _ in $(seq "${1:-3}"); do
		(cd "$ROOT" && go test -run '^$' -bench '^BenchmarkReadBandwidth$' -benchtime 20x -cpu "$THREADS" ./kernels/cpu/) |
			awk '{for (i = 2; i <= NF; i++) if ($i == "GB/s") print $(i-1)}'
	done | median
}

# prompt TOKENS: text of that many tokens in the SPM vocabulary (digits are a token each): the
# tokens of a 4,000-character sample, counted once on a tiny model of the same vocabulary, give
# the characters a token takes (the sample stays inside the tiny model's context, which caps
# the count)
prompt() {
	local tiny="$DIR/tiny-q8_0.gguf" n=$1 sample got
	[[ -s "$tiny" ]] || "$JSPARK" model synth --layers 1 --dim 64 --heads 2 --ff 128 --type q8_0 --vocab-from "$VOCAB" --out "$tiny" >/dev/null
	# (seq dies of SIGPIPE once head has its bytes: that status is not a failure)
	sample=$(seq 100000 999999 | head -c 4000 | tr '\n' ' ' || true)
	got=$("$JSPARK" generate --model "$tiny" --prompt "$sample" --max-tokens 0 --format json | json_field prompt_tokens)
	# less the BOS token on both sides
	seq 100000 999999 | head -c $((4000 * (n - 1) / (got - 1))) | tr '\n' ' ' || true
}

# run_jspark ISA MODEL PROMPT MAXTOK FIELD: tok/s of FIELD; peak RSS (KB) to $DIR/jrss
run_jspark() {
	local out
	out=$(JSPARK_ISA=$1 /usr/bin/time -o "$DIR/jrss.t" -f %M "$JSPARK" generate --model "$2" --threads "$THREADS" \
		--kv-type "$KV_TYPE" --prompt "$3" --max-tokens "$4" --format json)
	rss_kb "$DIR/jrss.t" >>"$DIR/jrss"
	echo "$out" | json_field "$5"
}

# run_peer BENCH MODEL ARGS...: one llama-bench run, its CSV to $DIR/peer.csv, peak RSS to $DIR/prss
run_peer() {
	local bench=$1 m=$2
	shift 2
	# shellcheck disable=SC2086
	/usr/bin/time -o "$DIR/prss.t" -f %M "$bench" -m "$m" -t "$THREADS" $PEER_FLAGS "$@" -r 1 -o csv >"$DIR/peer.csv" 2>/dev/null
	rss_kb "$DIR/prss.t" >>"$DIR/prss"
}

# row LABEL TEST FILE PEER_TS JSPARK_TS [decode]: one table row from the medians
row() {
	local fsize wb="" pbw="" jbw=""
	fsize=$(stat -L -c %s "$3") # the file, not a link to it
	if [[ ${6:-} == decode ]]; then
		wb=$(weight_bytes "$3")
		jbw=$(awk -v b="$wb" -v t="$5" -v r="$RBW" 'BEGIN {printf "%.1f (%.0f%%)", b*t/1e9, 100*b*t/1e9/r}')
		pbw=$(awk -v b="$wb" -v t="$4" 'BEGIN {printf "%.1f", b*t/1e9}')
	fi
	awk -v m="$1" -v t="$2" -v f="$fsize" -v p="$4" -v j="$5" -v jb="$jbw" -v pb="$pbw" \
		-v jr="$(median <"$DIR/jrss")" -v pr="$(median <"$DIR/prss")" \
		'BEGIN {printf "| %s | %.2f | %s | %.1f | %.1f | **%.2f** | %s | %s | %.2f | %.2f |\n", m, f/1e9, t, p, j, j/p, jb, pb, jr*1024/f, pr*1024/f}'
}

header() {
	echo
	echo "### $1"
	echo
	echo "| model | file GB | test | $PEER t/s | jspark t/s | jspark/$PEER | jspark GB/s (of read bw) | $PEER GB/s | jspark RSS/file | $PEER RSS/file |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
}

PP_PROMPT=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 42))

# pp_tg LABEL FILE BENCH ISA: the pp512 and tg128 rows of one model
pp_tg() {
	local lbl=$1 m=$2 bench=$3 isa=$4
	: >"$DIR/lpp"; : >"$DIR/ltg"; : >"$DIR/jpp"; : >"$DIR/jtg"; : >"$DIR/jrss"; : >"$DIR/prss"; : >"$DIR/rbw"
	for _ in $(seq "$REPEATS"); do
		run_peer "$bench" "$m" -p 512 -n 128
		peer_ts "$DIR/peer.csv" pp512 >>"$DIR/lpp"
		peer_ts "$DIR/peer.csv" tg128 >>"$DIR/ltg"
		run_jspark "$isa" "$m" "$PP_PROMPT" 1 prefill_tok_s >>"$DIR/jpp"
		read_bw 1 >>"$DIR/rbw"
		run_jspark "$isa" "$m" "The" 128 decode_tok_s >>"$DIR/jtg"
	done
	row "$lbl" pp512 "$m" "$(median <"$DIR/lpp")" "$(median <"$DIR/jpp")"
	RBW=$(median <"$DIR/rbw") row "$lbl" tg128 "$m" "$(median <"$DIR/ltg")" "$(median <"$DIR/jtg")" decode
}

RBW=$(read_bw)
echo "## jspark against $PEER ($LLAMA_BENCH)"
echo
echo "$THREADS threads, medians of $REPEATS alternating runs; $PEER's llama-bench with \`$PEER_FLAGS\`; jspark K/V $KV_TYPE."
echo "Read bandwidth (BenchmarkReadBandwidth, $THREADS threads): $RBW GB/s at the start (empty-context decode rows: against one measured before each of its decode runs, median). $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at start $LOAD0."

for part in $PARTS; do
	case $part in
	dense)
		header "Prefill 512 and decode 128 (empty context)"
		for size in $MODELS; do for type in $TYPES; do
			pp_tg "$size $type" "$(model "$size" "$type")" "$LLAMA_BENCH" ""
		done; done
		;;
	long)
		header "Decode 128 after a prompt of DEPTH tokens (llama-bench -gp DEPTH,128)"
		for size in $LONG_MODELS; do for type in $TYPES; do for depth in $DEPTHS; do
			m=$(model "$size" "$type")
			p=$(prompt "$depth")
			: >"$DIR/ltg"; : >"$DIR/jtg"; : >"$DIR/jrss"; : >"$DIR/prss"
			for _ in $(seq "$REPEATS"); do
				run_peer "$LLAMA_BENCH" "$m" -p 0 -n 0 -gp "$depth,128"
				peer_ts "$DIR/peer.csv" "tg128@pp$depth" >>"$DIR/ltg"
				run_jspark "" "$m" "$p" 128 decode_tok_s >>"$DIR/jtg"
			done
			row "$size $type" "tg128@$depth" "$m" "$(median <"$DIR/ltg")" "$(median <"$DIR/jtg")" decode
		done; done; done
		;;
	avx2)
		if [[ -z "${LLAMA_BENCH_AVX2:-}" ]]; then
			echo; echo "(avx2: skipped, LLAMA_BENCH_AVX2 unset: a peer built with -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF)"
			continue
		fi
		header "Forced AVX2: JSPARK_ISA=$AVX2_ISA against $PEER built without AVX-512 ($LLAMA_BENCH_AVX2)"
		for size in $AVX2_MODELS; do for type in $TYPES; do
			pp_tg "$size $type $AVX2_ISA" "$(model "$size" "$type")" "$LLAMA_BENCH_AVX2" "$AVX2_ISA"
		done; done
		;;
	moe)
		header "Mixtures of experts: prefill 512 and decode 128"
		for m in $MOE_MODELS; do
			case $m in gptoss-*) type=mxfp4 ;; *) type=q4_k_m ;; esac
			pp_tg "$m $type" "$(model "$m" "$type")" "$LLAMA_BENCH" ""
		done
		;;
	*) echo "PARTS: unknown part $part (want dense, long, avx2, moe)" >&2; exit 2 ;;
	esac
done
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."

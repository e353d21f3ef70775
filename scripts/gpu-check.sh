#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend's checks, for a session that is lent a GPU.
#
#   scripts/gpu-check.sh build   here, no GPU needed: make cuda, then the cuda-tagged
#                                test binary and jspark into build/gpu-check/ (ignored)
#   scripts/gpu-check.sh run     on the device machine, in one call (under 10 minutes):
#                                the device tool's run with carry ["build/gpu-check"],
#                                command "scripts/gpu-check.sh run", timeout_s 600
#   EMU=1 scripts/gpu-check.sh build; EMU=1 MODELS=tiny:q4_k scripts/gpu-check.sh run
#                                a dry run of the whole script here, on the host
#                                emulator (tag cudaemu) instead of a GPU
#
# run needs no Go: it uses the binaries build made. In order, each step bounded by
# `timeout`:
#   1. the synthetic models start in the background (`jspark model synth`, the 32000-
#      token SPM vocabulary): 1b = 16 layers, dim 2048, 32 heads (8 KV), ff 8192;
#      8b = 32 layers, dim 4096, 32 heads (8 KV), ff 14336 (llama 3.2 1B and llama 3
#      8B shapes); types from MODELS (default "1b:f16 1b:q4_k 8b:q8_0 8b:q4_k").
#   2. kernel parity against kernels/ref for every op and weight type, bit-exact batch
#      invariance (MatMul, Attend, the model's Forward across batching and chunked
#      prefill), stories260K greedy ids against testdata/refs (F32 cache) and the CPU's
#      (F16 cache): the Go tests of kernels/cuda.
#   3. the CLI end to end: jspark generate --device cuda --temperature 0 --format json
#      on the first reference prompt, ids compared with testdata/refs.
#   4. throughput (TestThroughput): prefill of 512 tokens and 128 decode tokens at
#      batch 1 per model, decode's weight bandwidth against a device-to-device copy.
# Everything it prints is also written under $OUT (the device tool brings it back),
# or build/gpu-check/out without one; the last lines are the summary.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/build/gpu-check"
cd "$ROOT"

build() {
	set -e
	mkdir -p "$BIN"
	if [[ -n "${EMU:-}" ]]; then
		go test -c -tags cudaemu -o "$BIN/cuda.test" ./kernels/cuda/
		go build -tags cudaemu -o "$BIN/jspark" ./cmd/jspark
	else
		make cuda
		CGO_CFLAGS="-I$ROOT/build/cuda/usr/include" CGO_LDFLAGS="-L$ROOT/build/cuda/usr/lib/x86_64-linux-gnu/stubs" \
			go test -c -tags cuda -o "$BIN/cuda.test" ./kernels/cuda/
		cp bin/jspark-cuda "$BIN/jspark"
	fi
	du -sh "$BIN"
	echo "gpu-check: built; on the device: scripts/gpu-check.sh run (carry build/gpu-check)"
}

shape() {
	case $1 in
	1b) echo "--layers 16 --dim 2048 --heads 32 --kv-heads 8 --ff 8192" ;;
	8b) echo "--layers 32 --dim 4096 --heads 32 --kv-heads 8 --ff 14336" ;;
	tiny) echo "--layers 2 --dim 256 --heads 4 --ff 512" ;; # for EMU=1 dry runs
	*) echo "gpu-check: unknown model size $1 (want 1b or 8b)" >&2; return 1 ;;
	esac
}

run() {
	local out=${OUT:-$BIN/out} synth=${SYNTH_DIR:-/tmp/jspark-synth} fail=0
	mkdir -p "$out" "$synth"
	exec > >(tee "$out/gpu-check.txt") 2>&1
	if [[ ! -x "$BIN/cuda.test" || ! -x "$BIN/jspark" ]]; then
		echo "gpu-check: no binaries in $BIN: run scripts/gpu-check.sh build first and carry build/gpu-check"
		exit 2
	fi
	command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv
	local t0=$SECONDS

	echo "== 1. synthesizing models in the background into $synth"
	local models=() pids=()
	for spec in ${MODELS:-1b:f16 1b:q4_k 8b:q8_0 8b:q4_k}; do
		local size=${spec%%:*} type=${spec##*:} path="$synth/$spec.gguf"
		path=${path//:/-}
		models+=("$path")
		if [[ -s "$path" ]]; then continue; fi
		# shellcheck disable=SC2046
		(timeout 420 "$BIN/jspark" model synth $(shape "$size") --type "$type" \
			--vocab-from testdata/vocab/ggml-vocab-llama-spm.gguf --out "$path.part" >/dev/null &&
			mv "$path.part" "$path") &
		pids+=($!)
	done

	echo "== 2. kernel parity, batch invariance, stories260K greedy ids"
	(cd kernels/cuda && timeout 240 "$BIN/cuda.test" -test.v -test.count=1 -test.timeout 230s \
		-test.run 'MatchesReference|BatchInvariant|Argmax|Upload|Stories') >"$out/parity.txt" 2>&1
	local rc=$?
	grep -E '^(=== RUN|\s*--- (FAIL|SKIP)|FAIL|ok|PASS|panic|kernels/cuda:)' "$out/parity.txt" | grep -v '=== RUN' | head -60
	grep -cE '^\s*--- PASS' "$out/parity.txt" | sed 's/^/parity: passed subtests and tests: /'
	if [[ $rc -ne 0 ]]; then
		echo "parity: FAILED (exit $rc); the failures:"
		grep -B2 -A8 -E -- '--- FAIL|panic' "$out/parity.txt" | head -80
		fail=1
	fi
	echo "   ($((SECONDS - t0)) s so far)"

	echo "== 3. jspark generate --device cuda on the first reference"
	local want got
	want=$(head -1 testdata/refs/stories260K-greedy.jsonl | grep -o '"gen_ids": \[[^]]*\]' | grep -o '\[.*\]' | tr -d ' ')
	got=$(timeout 60 "$BIN/jspark" generate --device cuda --temperature 0 --format json --max-tokens 48 \
		--prompt "Once upon a time" | grep -o '"ids":\[[^]]*\]' | grep -o '\[.*\]' | tr -d ' ')
	if [[ -n "$got" && "$got" == "$want" ]]; then
		echo "cli: ids equal the reference"
	else
		echo "cli: ids $got, want $want"
		fail=1
	fi

	echo "== 4. throughput"
	local ready=()
	for i in "${!pids[@]}"; do wait "${pids[$i]}"; done
	for m in "${models[@]}"; do
		if [[ -s "$m" ]]; then ready+=("$m"); else echo "throughput: $m was not synthesized in time"; fi
	done
	echo "   (models ready at $((SECONDS - t0)) s)"
	if ((${#ready[@]})); then
		# The emulator is far too slow for 512-token prompts: a dry run measures little.
		(cd kernels/cuda && JSPARK_GPU_MODELS="${ready[*]}" timeout $((570 - (SECONDS - t0))) \
			env ${EMU:+JSPARK_THROUGHPUT_PROMPT=16 JSPARK_THROUGHPUT_STEPS=8} \
			"$BIN/cuda.test" -test.v -test.count=1 -test.run 'Throughput' ${EMU:+-test.short}) >"$out/throughput.txt" 2>&1
		rc=$?
		grep -E '^throughput:|FAIL|panic' "$out/throughput.txt"
		if [[ $rc -ne 0 ]]; then
			[[ $rc -eq 124 ]] && echo "throughput: timed out (the models above finished)" || echo "throughput: FAILED (exit $rc)"
			fail=1
		fi
	fi

	echo "== summary ($((SECONDS - t0)) s)"
	grep -E -- '--- FAIL' "$out/parity.txt" "$out/throughput.txt" 2>/dev/null | head -20
	grep -h '^throughput:' "$out/throughput.txt" 2>/dev/null
	if [[ $fail -eq 0 ]]; then echo "gpu-check: all passed"; else echo "gpu-check: FAILED"; fi
	return $fail
}

case ${1:-} in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build|run" >&2
	exit 2
	;;
esac

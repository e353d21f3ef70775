# jspark — see README.md. Every target works on a fresh machine with Go.
GO      ?= go
PKGS    := ./...
# Packages with goroutines of their own run again under the race detector.
RACE    := $(foreach d,kernels/cpu backend/engine backend/server agent sandbox,$(if $(wildcard $(d)/*.go),./$(d)/...))
FUZZTIME ?= 30s

.PHONY: build run test race bench bench-peer fuzz lint clean

build:
	$(GO) build -o bin/jspark ./cmd/jspark

run:
	$(GO) run ./cmd/jspark work c6-repeat

# The kernels' portable half is built for arm64 too: only amd64 has the
# assembly, and a table or stub missing elsewhere breaks no amd64 test.
test:
	$(GO) vet $(PKGS)
	GOARCH=arm64 $(GO) vet ./kernels/...
	$(GO) test -count=1 $(PKGS)
	$(if $(RACE),$(GO) test -count=1 -race $(RACE))

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x $(PKGS)

# jspark against ik_llama.cpp (PEER=ik, its best settings) or llama.cpp (PEER=llama) on the
# same synthetic models; PARTS="dense long avx2 moe", LLAMA_BENCH_AVX2 (a peer built without
# AVX-512), MODELS, TYPES, DEPTHS, REPEATS: see scripts/bench-peer.sh.
bench-peer:
	@test -n "$(LLAMA_BENCH)" || (echo "usage: make bench-peer LLAMA_BENCH=/path/to/llama-bench"; exit 2)
	scripts/bench-peer.sh $(LLAMA_BENCH)

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./backend/gguf
	$(GO) test -run '^$$' -fuzz '^FuzzParseFields$$' -fuzztime $(FUZZTIME) ./backend/gguf
	$(GO) test -run '^$$' -fuzz '^FuzzLoadFields$$' -fuzztime $(FUZZTIME) ./backend/model
	$(GO) test -run '^$$' -fuzz '^FuzzLoadMoEFields$$' -fuzztime $(FUZZTIME) ./backend/model
	$(GO) test -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME) ./backend/tokenizer
	$(GO) test -run '^$$' -fuzz '^FuzzFromHF$$' -fuzztime $(FUZZTIME) ./backend/tokenizer
	$(GO) test -run '^$$' -fuzz '^FuzzParser$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzQwen3Coder$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzHarmony$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzGLM$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzMistral$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzKimi$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzDeepSeek$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzLlama$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzReasoning$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzValidNeverPanics$$' -fuzztime $(FUZZTIME) ./backend/grammar
	$(GO) test -run '^$$' -fuzz '^FuzzChatBody$$' -fuzztime $(FUZZTIME) ./backend/server
	$(GO) test -run '^$$' -fuzz '^FuzzResponsesBody$$' -fuzztime $(FUZZTIME) ./backend/server
	$(GO) test -run '^$$' -fuzz '^FuzzCompletionsBody$$' -fuzztime $(FUZZTIME) ./backend/server
	$(GO) test -run '^$$' -fuzz '^FuzzServeBody$$' -fuzztime $(FUZZTIME) ./backend/server
	$(GO) test -run '^$$' -fuzz '^FuzzServeTemplate$$' -fuzztime $(FUZZTIME) ./backend/server
	$(GO) test -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime $(FUZZTIME) ./backend/jinja
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./recipes
	$(GO) test -run '^$$' -fuzz '^FuzzBuild$$' -fuzztime $(FUZZTIME) ./agent/atif

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "gofmt: files above need formatting"; exit 1)
	$(GO) vet $(PKGS)

clean:
	rm -rf bin

# The CUDA backend (kernels/cuda, build tag cuda). Fetches CUDA 11.8 from
# Debian's non-free section into build/cuda (scripts/cuda-deps.sh; nothing is
# installed), compiles every kernels/cuda/*.cu to PTX for compute_80 and
# compute_90 (checked in, embedded by go:embed), assembles each with ptxas
# for sm_80 and sm_90 (registers and spills in build/cuda/ptxas.log), then
# vets and builds with the cuda tag against the driver stub. Needs no GPU;
# the binary it makes needs the NVIDIA driver (libcuda.so.1) to start.
CUDA_DIR  := build/cuda
NVCC      := $(CUDA_DIR)/usr/lib/nvidia-cuda-toolkit/bin/nvcc
PTXAS     := $(CUDA_DIR)/usr/bin/ptxas
# nvcc's own directory holds Debian's g++ wrapper, which wants g++-11: name
# the machine's g++ (12), which 11.8 accepts with -allow-unsupported-compiler.
NVCCFLAGS := -ccbin $(shell command -v g++) -std=c++17 -fmad=false -allow-unsupported-compiler
CU_SRC    := $(wildcard kernels/cuda/*.cu)
CU_PTX    := $(foreach a,80 90,$(patsubst kernels/cuda/%.cu,kernels/cuda/ptx/%.compute_$(a).ptx,$(CU_SRC)))
CUDA_ENV  := CGO_CFLAGS="-I$(abspath $(CUDA_DIR))/usr/include" CGO_LDFLAGS="-L$(abspath $(CUDA_DIR))/usr/lib/x86_64-linux-gnu/stubs"

.PHONY: cuda cuda-ptx cuda-check cuda-emu FORCE

cuda: cuda-check
	$(CUDA_ENV) $(GO) vet -tags cuda ./kernels/cuda/ ./cmd/...
	$(CUDA_ENV) $(GO) build -tags cuda ./...
	$(CUDA_ENV) $(GO) build -tags cuda -o bin/jspark-cuda ./cmd/jspark

$(NVCC) $(PTXAS):
	scripts/cuda-deps.sh $(CUDA_DIR)

cuda-ptx: $(CU_PTX)

# Always compiled (FORCE), not by timestamps: a fresh clone's checkout order
# would otherwise skip nvcc. The output is deterministic, so `git status`
# shows checked-in PTX that no longer matches its source.
kernels/cuda/ptx/%.compute_80.ptx: kernels/cuda/%.cu kernels/cuda/common.cuh kernels/cuda/quants.cuh FORCE | $(NVCC)
	$(NVCC) $(NVCCFLAGS) -ptx -arch=compute_80 $< -o $@
kernels/cuda/ptx/%.compute_90.ptx: kernels/cuda/%.cu kernels/cuda/common.cuh kernels/cuda/quants.cuh FORCE | $(NVCC)
	$(NVCC) $(NVCCFLAGS) -ptx -arch=compute_90 $< -o $@

FORCE:

# ptxas assembles each PTX for its own architecture (as the driver's JIT
# will): syntax, register and type errors fail here, without a GPU.
cuda-check: cuda-ptx | $(PTXAS)
	@: > $(CUDA_DIR)/ptxas.log
	@for p in $(CU_PTX); do a=$${p##*.compute_}; a=sm_$${a%.ptx}; \
		echo "ptxas -arch=$$a $$p" | tee -a $(CUDA_DIR)/ptxas.log; \
		$(PTXAS) -arch=$$a -v $$p -o /dev/null >>$(CUDA_DIR)/ptxas.log 2>&1 || { tail -20 $(CUDA_DIR)/ptxas.log; exit 1; }; \
	done
	@grep -c "Compiling entry" $(CUDA_DIR)/ptxas.log | sed 's/^/ptxas: kernels assembled: /'
	@awk '/Function properties for/ {f=$$NF} /bytes spill stores/ && $$5 > 0 {print "ptxas: " f ": " $$0}' $(CUDA_DIR)/ptxas.log | sort -u

# The GPU tests of kernels/cuda without a GPU: the same CUDA C compiled as
# C++ and run by a host emulator (kernels/cuda/emu.cpp; every GPU thread a
# fiber), behind the same Go device code. Slow (tens of minutes on 2 cores,
# past go test's default 10-minute limit), so not in make test.
cuda-emu:
	$(GO) test -count=1 -timeout 90m -tags cudaemu ./kernels/cuda/

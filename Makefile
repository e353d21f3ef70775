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

test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 $(PKGS)
	$(if $(RACE),$(GO) test -count=1 -race $(RACE))

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x $(PKGS)

# jspark against llama.cpp on the same synthetic models (scripts/bench-peer.sh).
bench-peer:
	@test -n "$(LLAMA_BENCH)" || (echo "usage: make bench-peer LLAMA_BENCH=/path/to/llama-bench"; exit 2)
	scripts/bench-peer.sh $(LLAMA_BENCH)

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./backend/gguf
	$(GO) test -run '^$$' -fuzz '^FuzzParseFields$$' -fuzztime $(FUZZTIME) ./backend/gguf
	$(GO) test -run '^$$' -fuzz '^FuzzLoadFields$$' -fuzztime $(FUZZTIME) ./backend/model
	$(GO) test -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME) ./backend/tokenizer
	$(GO) test -run '^$$' -fuzz '^FuzzParser$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzReasoning$$' -fuzztime $(FUZZTIME) ./backend/chat
	$(GO) test -run '^$$' -fuzz '^FuzzValidNeverPanics$$' -fuzztime $(FUZZTIME) ./backend/grammar
	$(GO) test -run '^$$' -fuzz '^FuzzChatBody$$' -fuzztime $(FUZZTIME) ./backend/server
	$(GO) test -run '^$$' -fuzz '^FuzzResponsesBody$$' -fuzztime $(FUZZTIME) ./backend/server
	$(GO) test -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime $(FUZZTIME) ./backend/jinja

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "gofmt: files above need formatting"; exit 1)
	$(GO) vet $(PKGS)

clean:
	rm -rf bin

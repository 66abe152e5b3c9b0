# Kiln: build, test and run. `make help` lists the targets.
GO       ?= go
BIN      ?= bin
PKGS     ?= ./...
# go test's -timeout is a hang detector for each package, so it must sit above
# the safety limits of the package's own waits, or its panic hides which one
# ran out: initramfs's TestBootQEMU allows its build 30 minutes and each of
# three boots 12. At load 40-50 on two cores a whole run took 31-43 minutes.
TEST_TIMEOUT ?= 75m
# Tools the scripts and tests run (depmod, losetup, sgdisk, mkfs.vfat, ...)
# are in /usr/sbin and /sbin, which a normal user's PATH lacks.
export PATH := $(PATH):/usr/sbin:/sbin

.PHONY: help build test lint run bench fuzz clean

help: ## this list: every target, from this Makefile and the */*.mk files it includes
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort | awk -F'\t' '{printf "  %-20s %s\n", $$1, $$2}'

build: ## build kiln and kiln-agent (static) into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -o $(BIN)/kiln ./controller/cmd/kiln
	@if [ -d agent/cmd/kiln-agent ]; then CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/kiln-agent ./agent/cmd/kiln-agent; fi

# The packages that run kiln serve share one build of it (KILN_TEST_KILN,
# test/kilnproc) instead of linking one each.
test: ## run every test (root-only and QEMU tests skip, saying why, when their tools are absent)
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	echo "$(GO) build -o $$dir/kiln ./controller/cmd/kiln" && $(GO) build -o "$$dir/kiln" ./controller/cmd/kiln && \
	echo "KILN_TEST_KILN=$$dir/kiln $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)" && \
	KILN_TEST_KILN="$$dir/kiln" $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

run: ## run the controller on its embedded SQLite database (127.0.0.1:6385, ./kiln.db)
	$(GO) run ./controller/cmd/kiln serve

# Iterations per benchmark: enough for a steady CPU-per-request figure while
# keeping `make bench` short. BenchmarkScale runs at 1,000 and 10,000 nodes;
# KILN_BENCH_NODES=1000,10000,100000 make bench adds the 100k check.
BENCHTIME ?= 100x

bench: ## run the Go benchmarks (API routes, and every list shape at 1k and 10k nodes)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

fuzz: ## run each fuzz target briefly (FUZZTIME, default 20s)
	@for t in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== $$t $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-20s} $$t || exit 1; \
	  done; done

clean: ## remove bin/ and out/ (the built kernel and initramfs)
	rm -rf $(BIN) out

-include $(wildcard */*.mk */*/*.mk)

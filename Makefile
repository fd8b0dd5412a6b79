# prequalbench: build, test and lint. `make test` is the one test command
# (lint included); .ci/run calls it on a fresh machine after hack/setup.sh.

GO            ?= go
CARGO         ?= cargo
BIN           := bin
REVISION      := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS       := -X github.com/prequalbench/prequalbench/internal/buildinfo.Revision=$(REVISION)
BACKEND_BIN   := backend/target/release/prequal-backend
# Test timeout for the whole Go suite; individual tests poll with deadlines.
GOTEST_FLAGS  ?= -timeout 15m

.PHONY: all build backend test test-go test-rust lint bench kube-bins campaign docs clean fuzz-short

all: build

build: backend
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/prequalbench ./cmd/prequalbench

backend:
	cd backend && $(CARGO) build --release --quiet

# The real kube-apiserver and etcd the Kubernetes tests start (built once per machine).
kube-bins:
	@hack/kube-test-bins.sh >/dev/null

test: lint backend kube-bins
	KUBEBUILDER_ASSETS="$$(hack/kube-test-bins.sh)" PREQUALBENCH_BACKEND_BIN="$(CURDIR)/$(BACKEND_BIN)" \
		$(GO) test $(GOTEST_FLAGS) ./...
	cd backend && $(CARGO) test
	$(MAKE) fuzz-short

# Every Go fuzz target runs for FUZZTIME, one at a time (go test -fuzz takes
# one target per run), so a wrong oracle or a new crasher shows up in CI and
# not only when someone fuzzes by hand. The list is found, not kept.
# FUZZTIME is a count, not a duration: before Go 1.27 a duration's deadline
# races the fuzz workers' shutdown on a loaded machine and fails the target
# with a bare "context deadline exceeded" and no input (go.dev/issue/75804).
FUZZTIME ?= 5000x
fuzz-short:
	@set -e; for f in $$(git grep -l '^func Fuzz' -- '*_test.go'); do \
		pkg=./$$(dirname $$f); \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
			out=$$($(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg 2>&1) || \
				{ echo "$$out"; exit 1; }; \
		done; \
	done

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool -modfile=hack/tools/go.mod actionlint .github/workflows/*.yml
	cd backend && $(CARGO) fmt --check && $(CARGO) clippy --quiet -- -D warnings

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./loadbalancer/ ./ingress/... ./load/

# Direct, nginx and the ingress (round-robin, prequal) side by side on
# loopback; needs nginx and wrk. BENCH_PROXY_ARGS: ROUNDS DURATION CONNECTIONS RATE RATE_DURATION.
.PHONY: bench-proxy
bench-proxy:
	hack/bench-proxy.sh $(BENCH_PROXY_ARGS)

# The README's main job: a local quickstart campaign and its report.
campaign: build
	$(BIN)/prequalbench campaign run --scenario quickstart --backend-bin $(BACKEND_BIN)

clean:
	rm -rf $(BIN) backend/target

# Re-render every table the docs publish from its committed campaign.
docs:
	$(GO) test ./reports/published -run TestPublishedTablesMatchReport -update

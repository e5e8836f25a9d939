# kubestellar: build, test and verify. `make help` lists the targets.
GO ?= go
BIN := _output/kubestellar
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/kubestellar/kubestellar/internal/version.Version=$(VERSION) -X github.com/kubestellar/kubestellar/internal/version.Commit=$(COMMIT)
# Tests build the binary once and share it through this variable.
export KUBESTELLAR_BIN ?= $(CURDIR)/$(BIN)
TEST_FLAGS ?=
RUN_ARGS ?=
BENCH_ARGS ?=
SOAK_ARGS ?=
CHAOS_ARGS ?=

# The unit tests are every package but the integration and end-to-end
# suites; -short skips the edge cluster harness's tests that start clusters.
UNIT_PACKAGES = $$($(GO) list ./... | grep -v -e /test/integration -e /test/e2e)
# make test runs these under the race detector: the server's controllers,
# the shared worker loop, spaces, the API server, the dashboard, the tunnel, and the
# integration suite, which runs all of them in one process. Everything else
# runs as it is.
RACE_PACKAGES = ./controllers/... ./internal/... ./spaces/... ./server/... ./dashboard/... ./tunnel/... ./syncer/... ./test/integration/...
NON_RACE_PACKAGES = $$($(GO) list ./... | grep -vxF "$$($(GO) list $(RACE_PACKAGES))")
# The bench driver and the dashboard's browser test (browser/) are a module
# of their own, so that chromedp is not in the product's go.mod: go -C runs
# in it. Its tests run as they are, like the end-to-end suite; make
# test-unit runs all but the browser test.
BENCH_MODULE := test/bench
BENCH_UNIT_PACKAGES = $$($(GO) -C $(BENCH_MODULE) list ./... | grep -v /browser)

# The image builder is a module of its own too (go-containerregistry is
# not the product's dependency).
IMAGE_MODULE := packaging/image
IMAGE_DIR ?= _output/image

.PHONY: help build run image test-image test test-deps test-unit test-integration test-e2e verify codegen docs bench bench-docs bench-merge bench-compare bench-deps clean deb deb-test soak chaos

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-20s %s\n", $$1, $$2}'

build: ## Build the kubestellar binary into _output/
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kubestellar

image: ## Build the OCI image (linux/amd64 and arm64, static, non-root, reproducible) into $(IMAGE_DIR) as an OCI layout, no Docker; IMAGE_PUSH=REGISTRY/REPO:TAG pushes it too
	hack/build-image.sh $(IMAGE_DIR)

test-image: ## Build the image twice and check it: platforms, entrypoint, user, no shell, the binary runs, one commit one digest
	hack/build-image.sh _output/image-test
	hack/build-image.sh _output/image-test-again
	KUBESTELLAR_IMAGE_LAYOUT=$(CURDIR)/_output/image-test KUBESTELLAR_IMAGE_LAYOUT_AGAIN=$(CURDIR)/_output/image-test-again \
	$(GO) -C $(IMAGE_MODULE) test $(TEST_FLAGS) -count=1 ./...

run: build ## Run the server on its embedded default (SQLite in ~/.kubestellar or /var/lib/kubestellar)
	$(BIN) server start $(RUN_ARGS)

test: build test-deps edgecluster-tools ## Run every test: unit, integration (in-process server), e2e (built binary, real kubectl, edge clusters, proxies, databases), the image's; the server's and the syncer's packages and the integration suite under -race
	$(GO) test $(TEST_FLAGS) -timeout 60m $(NON_RACE_PACKAGES)
	$(MAKE) test-image
	$(GO) -C $(BENCH_MODULE) test $(TEST_FLAGS) -timeout 60m ./...
	$(GO) test $(TEST_FLAGS) -race -timeout 60m $(RACE_PACKAGES)

test-deps: ## Install the Debian packages the tests use, where missing (as root; else says what to install)
	hack/test-deps.sh

test-unit: ## Run the unit tests only: no server, no binary, no edge cluster (all packages but test/integration, test/e2e and test/bench/browser, -short)
	$(GO) test $(TEST_FLAGS) -short $(UNIT_PACKAGES)
	$(GO) -C $(BENCH_MODULE) test $(TEST_FLAGS) -short $(BENCH_UNIT_PACKAGES)
	$(GO) -C $(IMAGE_MODULE) test $(TEST_FLAGS) -short ./...

test-integration: ## Run the integration tests: the server in-process, nothing else built or installed
	$(GO) test $(TEST_FLAGS) -timeout 60m ./test/integration/...

test-e2e: build test-deps edgecluster-tools ## Run the end-to-end tests (built binary, real kubectl, edge clusters, proxies, databases)
	$(GO) test $(TEST_FLAGS) -timeout 60m ./test/e2e/...
	$(GO) -C $(BENCH_MODULE) test $(TEST_FLAGS) -timeout 60m ./browser/...

verify: ## gofmt, go vet, staticcheck, import layers, license headers, the docs' links and commands, generated code and docs, go.mod drift
	hack/verify.sh

codegen: ## Regenerate deepcopy, CRDs and OpenAPI models
	hack/update-codegen.sh

docs: ## Regenerate the reference docs: the CLI's (docs/reference/commands/) from its cobra tree, the API's (docs/reference/api.md) from apis/
	$(GO) run ./hack/gendocs

bench: build bench-deps ## Measure the server, syncer, tunnels and datastores (prints each section's table as it ends; writes them to _output/bench/ as JSON and Markdown, merges them into docs/performance.json and writes docs/performance.md's table; installs what it needs first)
	$(GO) -C $(BENCH_MODULE) run . -kubestellar $(CURDIR)/$(BIN) $(BENCH_ARGS)

conformance: build edgecluster-tools ## Run Kubernetes' own sig-api-machinery and sig-cli e2e specs against a space and a stock kube-apiserver (no nodes); table to docs/conformance.md (builds e2e.test once per machine; an hour or more; CONFORMANCE_FOCUS, CONFORMANCE_SKIP, CONFORMANCE_PARALLEL)
	KUBESTELLAR_BIN=$(CURDIR)/$(BIN) KUBESTELLAR_CONFORMANCE=1 KUBESTELLAR_CONFORMANCE_OUT=$(CURDIR)/docs/conformance.md KUBESTELLAR_CONFORMANCE_REPORTS=$(CURDIR)/_output/conformance \
	KUBESTELLAR_CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' KUBESTELLAR_CONFORMANCE_SKIP='$(CONFORMANCE_SKIP)' KUBESTELLAR_CONFORMANCE_PARALLEL=$(CONFORMANCE_PARALLEL) \
	$(GO) test ./test/conformance/ -run TestConformance -count=1 -timeout 8h -v

bench-docs: ## Write docs/performance.md's table again from docs/performance.json (make bench does after each run), measuring nothing
	$(GO) -C $(BENCH_MODULE) run . -docs

bench-merge: ## Merge a saved make bench run made without recording into docs/performance.json and the table: make bench-merge REPORT=_output/bench/bench-....json
	@test -n "$(REPORT)" || { echo "usage: make bench-merge REPORT=_output/bench/bench-....json" >&2; exit 2; }
	$(GO) -C $(BENCH_MODULE) run . -merge $(abspath $(REPORT))

bench-compare: ## Compare two make bench reports: make bench-compare OLD=_output/bench/bench-A.json NEW=_output/bench/latest.json
	@test -n "$(OLD)" -a -n "$(NEW)" || { echo "usage: make bench-compare OLD=_output/bench/bench-....json NEW=_output/bench/latest.json" >&2; exit 2; }
	$(GO) -C $(BENCH_MODULE) run . -compare $(abspath $(OLD)),$(abspath $(NEW))

soak: build ## Soak one server (SQLite) for 30 min: 50 simulated syncers, churn; table of RSS, goroutines, FDs, SQLite size; fails on >10 % growth after warm-up or anything unreconciled (SOAK_ARGS='-duration 5m')
	$(GO) -C $(BENCH_MODULE) run . -kubestellar $(CURDIR)/$(BIN) -soak $(SOAK_ARGS)

chaos: build ## kill -9 one SQLite server while it makes 10,000 mailbox copies, restart it, check every mailbox is exact (CHAOS_ARGS='-chaos-targets 1000 -chaos-objects 10')
	$(GO) -C $(BENCH_MODULE) run . -kubestellar $(CURDIR)/$(BIN) -chaos $(CHAOS_ARGS)

bench-deps: edgecluster-tools ## Install what the benchmarks need, where missing: PostgreSQL, MariaDB (as root; else says what), edge cluster binaries
	hack/bench-deps.sh

deb: build ## Build the Debian package _output/kubestellar_<version>_<arch>.deb (needs dpkg-deb)
	hack/build-deb.sh $(BIN) $(VERSION) _output

deb-test: deb ## As root: install the .deb, check it, purge it, check nothing is left
	hack/test-deb.sh _output

clean: ## Remove build output
	rm -rf _output

include test/edgecluster/edgecluster.mk

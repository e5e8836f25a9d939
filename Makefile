# kubestellar: build, test and verify. `make help` lists the targets.
GO ?= go
BIN := _output/kubestellar
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
LDFLAGS := -X github.com/kubestellar/kubestellar/cmd/kubestellar/app/version.Version=$(VERSION)
# Tests build the binary once and share it through this variable.
export KUBESTELLAR_BIN ?= $(CURDIR)/$(BIN)
TEST_FLAGS ?=
RUN_ARGS ?=

.PHONY: help build run test test-deps test-unit test-integration test-e2e verify codegen bench clean deb deb-test

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-20s %s\n", $$1, $$2}'

build: ## Build the kubestellar binary into _output/
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kubestellar

run: build ## Run the server on its embedded default (SQLite in ~/.kubestellar or /var/lib/kubestellar)
	$(BIN) server start $(RUN_ARGS)

test: build test-deps ## Run every test: unit, integration (in-process server), e2e (built binary, real kubectl, edge clusters, proxies, PostgreSQL)
	$(GO) test $(TEST_FLAGS) -timeout 60m ./...

test-deps: ## Install the Debian packages the tests use, where missing (as root; else says what to install)
	hack/test-deps.sh

test-unit: ## Run the unit tests only
	$(GO) test $(TEST_FLAGS) -short ./...

test-integration: ## Run the integration tests (in-process server)
	$(GO) test $(TEST_FLAGS) ./test/integration/...

test-e2e: build test-deps ## Run the end-to-end tests (built binary, real kubectl)
	$(GO) test $(TEST_FLAGS) ./test/e2e/...

verify: ## gofmt, go vet, staticcheck, generated code and go.mod drift
	hack/verify.sh

codegen: ## Regenerate deepcopy, CRDs and OpenAPI models
	hack/update-codegen.sh

bench: build ## Measure the server: readiness, memory, throughput, latency (prints tables)
	$(GO) run ./test/bench -kubestellar $(BIN)

deb: build ## Build the Debian package _output/kubestellar_<version>_<arch>.deb (needs dpkg-deb)
	hack/build-deb.sh $(BIN) $(VERSION) _output

deb-test: deb ## As root: install the .deb, check it, purge it, check nothing is left
	hack/test-deb.sh _output

clean: ## Remove build output
	rm -rf _output

include test/edgecluster/edgecluster.mk

#!/usr/bin/env bash
# Builds the pinned code generators and linters of hack/tools/go.mod into
# hack/tools/bin (once; go's build cache makes later calls cheap) and prints
# that directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/hack/tools/bin"
mkdir -p "$bin"
stamp="$bin/.stamp-$(sha256sum "$root/hack/tools/go.sum" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "building code generators and linters (hack/tools)..." >&2
  (cd "$root/hack/tools" && GOBIN="$bin" GOFLAGS=-mod=mod go install \
    sigs.k8s.io/controller-tools/cmd/controller-gen \
    k8s.io/kube-openapi/cmd/openapi-gen \
    honnef.co/go/tools/cmd/staticcheck)
  rm -f "$bin"/.stamp-* && touch "$stamp"
fi
echo "$bin"

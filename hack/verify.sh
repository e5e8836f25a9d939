#!/usr/bin/env bash
# Every check `make verify` runs: formatting, vet, staticcheck, the import
# layers, license headers, the docs' links and commands, generated code and
# module tidiness. Exits non-zero after them all if any failed, having
# printed what to run to fix each.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$("$root/hack/tools.sh")
fail=0

echo "== gofmt"
unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs gofmt -l)
if [ -n "$unformatted" ]; then echo "$unformatted"; echo "run: gofmt -w on the files above" >&2; fail=1; fi

echo "== go vet"
go vet ./... || fail=1

echo "== staticcheck"
# Generated OpenAPI models reference deprecated built-in types on purpose.
findings=$("$bin/staticcheck" ./... 2>&1 | grep -v '^server/openapi/zz_generated' || true)
if [ -n "$findings" ]; then echo "$findings"; fail=1; fi

echo "== import layers"
go run ./hack/layers || fail=1

echo "== license headers"
go run ./hack/headers || fail=1

echo "== docs: links and kubestellar commands"
go run ./hack/docscheck || fail=1

echo "== generated docs"
go run ./hack/gendocs -check || fail=1

echo "== generated code"
"$root/hack/verify-codegen.sh" || fail=1

echo "== go.mod tidy"
for mod in . hack/tools test/edgecluster/tools test/edgecluster/kine test/edgecluster/konnectivity test/helmtool test/conformance/suite; do
  [ -f "$mod/go.mod" ] || continue
  (cd "$mod" && cp go.mod /tmp/verify-go.mod && cp go.sum /tmp/verify-go.sum &&
    go mod tidy >/dev/null 2>&1 &&
    if ! git diff --quiet -- go.mod go.sum; then
      git diff -- go.mod go.sum | head -20
      cp /tmp/verify-go.mod go.mod; cp /tmp/verify-go.sum go.sum
      echo "$mod/go.mod is not tidy: run 'go mod tidy' in $mod" >&2; exit 1
    fi) || fail=1
done
exit $fail

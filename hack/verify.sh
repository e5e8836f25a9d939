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
# A file deleted (or moved) but not yet staged is listed and gone: skip it.
unformatted=$(git ls-files -co --exclude-standard '*.go' | while IFS= read -r f; do [ ! -e "$f" ] || echo "$f"; done | xargs gofmt -l)
if [ -n "$unformatted" ]; then echo "$unformatted"; echo "run: gofmt -w on the files above" >&2; fail=1; fi

echo "== go vet"
go vet ./... || fail=1
# test/bench is a module of its own (the bench and the dashboard's browser
# test: chromedp stays out of the product's go.mod); ./... stops at it.
go -C test/bench vet ./... || fail=1
# So is packaging/image, the image builder (go-containerregistry).
go -C packaging/image vet ./... || fail=1

echo "== staticcheck"
# Generated OpenAPI models reference deprecated built-in types on purpose.
findings=$("$bin/staticcheck" ./... 2>&1 | grep -v '^server/openapi/zz_generated' || true)
if [ -n "$findings" ]; then echo "$findings"; fail=1; fi
for mod in test/bench packaging/image; do
  findings=$(cd "$mod" && "$bin/staticcheck" ./... 2>&1 | sed "s|^|$mod/|" || true)
  if [ -n "$findings" ]; then echo "$findings"; fail=1; fi
done

echo "== import layers"
go run ./hack/layers || fail=1
go run ./hack/layers -C test/bench || fail=1

echo "== license headers"
go run ./hack/headers || fail=1

echo "== docs: links and kubestellar commands"
go run ./hack/docscheck || fail=1

echo "== generated docs"
go run ./hack/gendocs -check || fail=1

echo "== generated code"
"$root/hack/verify-codegen.sh" || fail=1

echo "== go.mod tidy"
for mod in . test/bench packaging/image hack/tools test/edgecluster/tools test/edgecluster/kine test/edgecluster/konnectivity test/helmtool test/conformance/suite; do
  [ -f "$mod/go.mod" ] || continue
  (cd "$mod" && cp go.mod /tmp/verify-go.mod && cp go.sum /tmp/verify-go.sum &&
    go mod tidy >/dev/null 2>&1 &&
    # Compared with the copies, not with git: a go.mod changed or added
    # and not yet committed is checked too.
    if ! cmp -s go.mod /tmp/verify-go.mod || ! cmp -s go.sum /tmp/verify-go.sum; then
      diff -u /tmp/verify-go.mod go.mod | head -20 || true
      diff -u /tmp/verify-go.sum go.sum | head -10 || true
      cp /tmp/verify-go.mod go.mod; cp /tmp/verify-go.sum go.sum
      echo "$mod/go.mod is not tidy: run 'go mod tidy' in $mod" >&2; exit 1
    fi) || fail=1
done
exit $fail

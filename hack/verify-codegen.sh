#!/usr/bin/env bash
# Fails when checked-in generated code differs from what the generators make.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/hack/update-codegen.sh"
paths=(apis server/openapi hack/openapi-violations.list)
if ! git diff --quiet -- "${paths[@]}" || [ -n "$(git ls-files --others --exclude-standard -- "${paths[@]}")" ]; then
  git status --short -- "${paths[@]}"
  echo "generated code is out of date: run 'make codegen' and commit the result" >&2
  exit 1
fi

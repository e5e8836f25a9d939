#!/usr/bin/env bash
# Regenerates everything generated that is checked in:
#   - deepcopy functions and CRD manifests of our API types (controller-gen);
#   - OpenAPI definitions of the built-in Kubernetes kinds the server hosts
#     (openapi-gen), which server-side apply, kubectl explain and validation use.
# hack/verify-codegen.sh runs this and fails if the tree then differs from git.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$("$root/hack/tools.sh")
cd "$root"

"$bin/controller-gen" object:headerFile=hack/boilerplate.go.txt paths=./apis/...
"$bin/controller-gen" crd paths=./apis/... output:crd:artifacts:config=apis/crds

openapi_pkgs=(
  k8s.io/apimachinery/pkg/apis/meta/v1
  k8s.io/apimachinery/pkg/runtime
  k8s.io/apimachinery/pkg/util/intstr
  k8s.io/apimachinery/pkg/api/resource
  k8s.io/apimachinery/pkg/version
  k8s.io/api/core/v1
  k8s.io/api/apps/v1
  k8s.io/api/batch/v1
  k8s.io/api/autoscaling/v1
  k8s.io/api/autoscaling/v2
  k8s.io/api/networking/v1
  k8s.io/api/rbac/v1
  k8s.io/api/policy/v1
  k8s.io/api/coordination/v1
  k8s.io/api/discovery/v1
  k8s.io/api/storage/v1
  k8s.io/api/scheduling/v1
  k8s.io/api/scheduling/v1alpha3
  k8s.io/api/node/v1
  k8s.io/api/admissionregistration/v1
  k8s.io/api/flowcontrol/v1
  k8s.io/api/storagemigration/v1
  k8s.io/api/authentication/v1
  k8s.io/api/authorization/v1
  k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1
)
"$bin/openapi-gen" \
  --go-header-file hack/boilerplate.go.txt \
  --output-dir "server/openapi" \
  --output-pkg github.com/kubestellar/kubestellar/server/openapi \
  --output-file zz_generated.openapi.go \
  --report-filename "hack/openapi-violations.list" \
  "${openapi_pkgs[@]}"

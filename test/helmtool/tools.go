// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package helmtool pins the helm CLI that the e2e tests run as a tenant's
// client. Nothing here is compiled: the blank import keeps helm in go.mod,
// and the harness builds it with `go build helm.sh/helm/v3/cmd/helm`.
package helmtool

import _ "helm.sh/helm/v3/cmd/helm"

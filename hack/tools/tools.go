// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the code generators and linters that hack/ and the
// Makefile run, in a module of their own so the product's go.mod stays small.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
	_ "k8s.io/kube-openapi/cmd/openapi-gen"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)

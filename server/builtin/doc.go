// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package builtin serves the built-in Kubernetes kinds at the center.
//
// kubestellar describes workloads; it does not run them, so built-in kinds
// are stored inert: no controller acts on a Deployment or a Pod here, and
// objects are stored as written, without the defaulting that a kubelet-facing
// API server applies (no clusterIP allocation, no default fields that would
// later be propagated to edge clusters). The one exception is a Service's
// type, which gets ClusterIP when it has none, as on every cluster (see
// defaultServiceType).
//
// The kinds are the versioned types of k8s.io/api. Each is registered in the
// scheme both under its version and as its own internal version, so the
// generic API server machinery (k8s.io/apiserver) serves it with no
// conversion and without importing k8s.io/kubernetes. kinds.go is the table
// of what is served; strategy.go holds the one strategy every kind shares,
// with small per-kind hooks; tables.go the kubectl columns.
package builtin

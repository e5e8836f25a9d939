// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 holds the tenancy.kubestellar.io API: the Space kind, the
// source of truth for which logical clusters a kubestellar server hosts.
//
// Spaces live in the root space. A Space named NAME is served at
// /spaces/NAME on the server; the space controller initializes it (default
// namespaces) and, when the Space is deleted, removes everything stored in it.
//
// +kubebuilder:object:generate=true
// +groupName=tenancy.kubestellar.io
package v1alpha1

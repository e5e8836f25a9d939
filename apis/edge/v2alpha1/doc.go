// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v2alpha1 is the edge.kubestellar.io API: what describes the edge
// clusters (SyncTarget, Location, kept in inventory spaces), what says which
// workload goes where (EdgePlacement, Customizer, StatusCollector, kept in
// workload description spaces), and what the controllers maintain
// (SinglePlacementSlice, SyncerConfig, CombinedStatus).
//
// SyncTarget and Location are our own copies of the kcp TMC kinds of the
// same names; EdgePlacement follows the KubeStellar edge multi-cluster
// design.
//
// +kubebuilder:object:generate=true
// +groupName=edge.kubestellar.io
package v2alpha1

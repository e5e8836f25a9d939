// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v2alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Customizer rewrites parts of the workload objects that name it (with the
// edge.kubestellar.io/customizer annotation) for each destination.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=cust,categories=kubestellar
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Customizer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Replacements are applied in order.
	// +optional
	Replacements []Replacement `json:"replacements,omitempty"`
}

// Replacement sets the value at a path.
type Replacement struct {
	// Path is a JSONPath to the field(s) to set, e.g. ".spec.replicas" or
	// ".spec.template.spec.containers[0].env[0].value".
	Path string `json:"path"`
	// Value is the JSON value to set there; with parameter expansion its
	// strings may name destination properties as %(key).
	Value apiextensionsv1.JSON `json:"value"`
}

// CustomizerList is a list of Customizers.
//
// +kubebuilder:object:root=true
type CustomizerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Customizer `json:"items"`
}

// SyncerConfig tells a syncer what to downsync from its mailbox space and
// what to upsync into it. There is one per mailbox, named "the-one".
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=kubestellar
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SyncerConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SyncerConfigSpec `json:"spec"`
}

// SyncerConfigName is the name of the one SyncerConfig in a mailbox.
const SyncerConfigName = "the-one"

// SyncerConfigSpec lists the resources the mailbox holds copies of, and
// the upsync sets.
type SyncerConfigSpec struct {
	// Namespaces the namespaced copies are in.
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// Resources holding copies, namespaced and cluster-scoped.
	// +optional
	Resources []SyncedResource `json:"resources,omitempty"`
	// CRDs names the CustomResourceDefinitions to create at the edge before
	// the objects that need them. The server binds them to the mailbox
	// (each space serves the CRDs bound to it), where the syncer reads them.
	// +optional
	CRDs []string `json:"crds,omitempty"`
	// Upsync selects edge objects to copy into the mailbox.
	// +optional
	Upsync []UpsyncClause `json:"upsync,omitempty"`
}

// SyncedResource is one resource the syncer watches in the mailbox.
type SyncedResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	// Namespaced is true for namespaced resources.
	Namespaced bool `json:"namespaced"`
}

// SyncerConfigList is a list of SyncerConfigs.
//
// +kubebuilder:object:root=true
type SyncerConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SyncerConfig `json:"items"`
}

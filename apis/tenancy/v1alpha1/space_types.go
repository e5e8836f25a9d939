// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpacePhase is where a Space is in its life.
type SpacePhase string

const (
	// SpacePhaseInitializing means the space is being set up and is not yet usable.
	SpacePhaseInitializing SpacePhase = "Initializing"
	// SpacePhaseReady means the space serves requests.
	SpacePhaseReady SpacePhase = "Ready"
	// SpacePhaseTerminating means the Space was deleted and its contents are being removed.
	SpacePhaseTerminating SpacePhase = "Terminating"
)

// SpaceFinalizer holds a deleted Space until everything stored in it is gone.
const SpaceFinalizer = "tenancy.kubestellar.io/space-contents"

// SpaceConditionReady is the condition type that is True once the space serves requests.
const SpaceConditionReady = "Ready"

// Space is a logical cluster hosted by the server, addressed as /spaces/NAME.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=sp,categories=kubestellar
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Space struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SpaceSpec `json:"spec,omitempty"`
	// +optional
	Status SpaceStatus `json:"status,omitempty"`
}

// Types of space. The type decides which of kubestellar's kinds a space
// holds and which controllers read it; it is set when the space is created
// and never changes.
const (
	// SpaceTypeGeneric ("") is a plain logical cluster: no edge kinds.
	SpaceTypeGeneric = ""
	// SpaceTypeWDS is a workload description space: workloads,
	// EdgePlacements, Customizers and StatusCollectors.
	SpaceTypeWDS = "wds"
	// SpaceTypeInventory holds SyncTargets and Locations.
	SpaceTypeInventory = "inventory"
	// SpaceTypeMailbox is what goes to one SyncTarget. Only the server
	// makes mailbox spaces.
	SpaceTypeMailbox = "mailbox"
)

// SpaceOwnerAnnotation on a Space names the user who created it (the
// server sets it; only its admins may change it). When the space is set
// up, that user is bound to cluster-admin in it (ClusterRoleBinding
// SpaceOwnerBinding): the creator of a space is its admin.
const (
	SpaceOwnerAnnotation = "tenancy.kubestellar.io/owner"
	SpaceOwnerBinding    = "kubestellar:space-owner"
)

// SpaceSpec is what the user asks of a Space.
//
// +kubebuilder:validation:XValidation:rule="!has(self.inventorySpaces) || size(self.inventorySpaces) == 0 || (has(self.type) && self.type == 'wds')",message="inventorySpaces is for spaces of type wds"
type SpaceSpec struct {
	// Type says what the space is for: "" (a plain logical cluster),
	// "wds", "inventory" or "mailbox" (made by the server only). It decides
	// which of kubestellar's kinds the space may hold and which
	// controllers read it. It cannot change.
	// +optional
	// +kubebuilder:validation:Enum="";wds;inventory;mailbox
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable"
	Type string `json:"type,omitempty"`
	// InventorySpaces, for a space of type wds, names the inventory spaces
	// whose Locations its EdgePlacements may select. A placement selects
	// nothing elsewhere.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	InventorySpaces []string `json:"inventorySpaces,omitempty"`
}

// SpaceStatus is what the server reports about a Space.
type SpaceStatus struct {
	// Phase is Initializing, Ready or Terminating.
	// +optional
	Phase SpacePhase `json:"phase,omitempty"`
	// URL is the path of the space on this server, relative to its base URL.
	// +optional
	URL string `json:"url,omitempty"`
	// Conditions of the space.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SpaceList is a list of Spaces.
//
// +kubebuilder:object:root=true
type SpaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Space `json:"items"`
}

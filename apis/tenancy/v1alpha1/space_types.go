// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
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
// +kubebuilder:printcolumn:name="Objects",type=integer,JSONPath=`.status.usage.objects`,priority=1
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.usage.bytes`,priority=1
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
	// Usage is what the space stores, as the server last counted it; the
	// spaces the limits do not apply to (root, mailboxes) show none.
	// +optional
	Usage *SpaceUsage `json:"usage,omitempty"`
	// Limits are the bounds that apply to the space: from the SpaceQuotas
	// in the root space, or the server's defaults.
	// +optional
	Limits *SpaceLimits `json:"limits,omitempty"`
}

// SpaceUsage is what a space stores.
type SpaceUsage struct {
	// Objects is how many objects the space stores, of every resource,
	// with the CRDs it serves alone or shares with other spaces.
	Objects int64 `json:"objects"`
	// Bytes is the size of those objects as stored in the datastore.
	Bytes int64 `json:"bytes"`
	// MailboxObjects is, for an inventory space, how many objects the
	// mailboxes of its SyncTargets hold: the copies the server placed
	// there, and what their syncers upsynced. Shown where a mailbox
	// limit applies.
	// +optional
	MailboxObjects *int64 `json:"mailboxObjects,omitempty"`
	// MailboxBytes is the size of those objects in the datastore.
	// +optional
	MailboxBytes *int64 `json:"mailboxBytes,omitempty"`
	// SyncTargets is, for an inventory space, how many SyncTargets it
	// holds. Shown where a SyncTarget limit applies.
	// +optional
	SyncTargets *int64 `json:"syncTargets,omitempty"`
}

// SpaceList is a list of Spaces.
//
// +kubebuilder:object:root=true
type SpaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Space `json:"items"`
}

// SpaceLimits bound what one space holds. A limit not set is taken from
// the next source: a SpaceQuota naming the space, then one naming no
// space (the default for every space), then the server's flags.
type SpaceLimits struct {
	// Objects is the most objects the space may store, of every resource
	// together; a create beyond it is refused (403).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Objects *int64 `json:"objects,omitempty"`
	// Bytes is the most the space's objects may take in the datastore; a
	// create or update that would pass it is refused (403).
	// +optional
	Bytes *resource.Quantity `json:"bytes,omitempty"`
	// Watches is the most watches the space's users may hold open on one
	// server at once; one more is answered 429.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Watches *int64 `json:"watches,omitempty"`
	// MailboxObjects is, for an inventory space a user created (not an
	// admin), the most objects the mailboxes of its SyncTargets may hold
	// together: a placement's copy beyond it is not written (its
	// EdgePlacement's Propagated condition says MailboxLimitExceeded). It
	// bounds what one tenant's SyncTargets multiply a workload into: every
	// copy is the server's to store.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MailboxObjects *int64 `json:"mailboxObjects,omitempty"`
	// MailboxBytes is, for an inventory space, the most those objects may
	// take in the datastore together.
	// +optional
	MailboxBytes *resource.Quantity `json:"mailboxBytes,omitempty"`
	// SyncTargets is the most SyncTargets the space may hold, for its
	// users' creates (not the admins'): each has a mailbox space at the
	// center, which costs the server as much memory as a space.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SyncTargets *int64 `json:"syncTargets,omitempty"`
}

// SpaceQuota sets the limits of spaces. It lives in the root space, where
// only the server's admins write it; 0 in a limit means no bound.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=kubestellar
// +kubebuilder:printcolumn:name="Spaces",type=string,JSONPath=`.spec.spaces`
// +kubebuilder:printcolumn:name="Objects",type=integer,JSONPath=`.spec.limits.objects`
// +kubebuilder:printcolumn:name="Bytes",type=string,JSONPath=`.spec.limits.bytes`
// +kubebuilder:printcolumn:name="Watches",type=integer,JSONPath=`.spec.limits.watches`
// +kubebuilder:printcolumn:name="Mailbox Objects",type=integer,JSONPath=`.spec.limits.mailboxObjects`,priority=1
// +kubebuilder:printcolumn:name="Mailbox Bytes",type=string,JSONPath=`.spec.limits.mailboxBytes`,priority=1
type SpaceQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SpaceQuotaSpec `json:"spec"`
}

// SpaceQuotaSpec says which spaces a SpaceQuota bounds, and how.
type SpaceQuotaSpec struct {
	// Spaces names the spaces these limits apply to. Empty: every space
	// that no SpaceQuota names (the default). Where several SpaceQuotas
	// apply at one level, the least limit holds.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	Spaces []string `json:"spaces,omitempty"`
	// Limits are the bounds.
	Limits SpaceLimits `json:"limits"`
}

// SpaceQuotaList is a list of SpaceQuotas.
//
// +kubebuilder:object:root=true
type SpaceQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpaceQuota `json:"items"`
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v2alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EdgePlacement says which workload objects of its workload description
// space (WDS) go to which Locations.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=epl,categories=kubestellar
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Locations",type=integer,JSONPath=`.status.matchingLocationCount`
// +kubebuilder:printcolumn:name="Problem",type=string,JSONPath=`.status.conditions[?(@.type=="Misconfigured")].message`,priority=1
// +kubebuilder:printcolumn:name="Dependencies",type=integer,JSONPath=`.status.dependencyCount`,priority=1
// +kubebuilder:printcolumn:name="Edges-Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EdgePlacement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EdgePlacementSpec `json:"spec"`
	// +optional
	Status EdgePlacementStatus `json:"status,omitempty"`
}

// EdgePlacementSpec is where (locationSelectors) and what (downsync, upsync).
type EdgePlacementSpec struct {
	// LocationSelectors select Locations, in any inventory space, by label; a
	// Location matches if any selector matches it.
	LocationSelectors []metav1.LabelSelector `json:"locationSelectors"`
	// Downsync selects the workload objects to place; an object matches if
	// any clause matches it.
	// +optional
	Downsync []DownsyncClause `json:"downsync,omitempty"`
	// WantSingletonReportedState asks, for objects placed on exactly one
	// cluster, that the WDS object's status be the edge's exact status.
	// +optional
	WantSingletonReportedState bool `json:"wantSingletonReportedState,omitempty"`
	// Upsync selects objects created at the edge to copy back to the WDS.
	// +optional
	Upsync []UpsyncClause `json:"upsync,omitempty"`
	// Dependencies says whether what the selected workloads reference in
	// the WDS goes with them. None (the default) places only what the
	// downsync clauses select. Follow also places, with each selected
	// workload, what it cannot run without: the ConfigMaps, Secrets,
	// PersistentVolumeClaims, ServiceAccount and image pull Secrets its pod
	// template references, an Ingress's TLS Secrets and backend Services,
	// and a custom resource's CRD. They follow it in step, leave with it,
	// and are listed in status.dependencies; a reference to an object the
	// WDS does not hold (and does not mark optional) is a problem on the
	// Propagated condition. Only what the placement's writer may read is
	// placed.
	// +optional
	// +kubebuilder:validation:Enum=None;Follow
	Dependencies DependencyPolicy `json:"dependencies,omitempty"`
}

// DependencyPolicy is an EdgePlacement's spec.dependencies.
type DependencyPolicy string

const (
	DependenciesNone   DependencyPolicy = "None"
	DependenciesFollow DependencyPolicy = "Follow"
)

// DependencyReasonNotFound is the reason of an EdgePlacement's Propagated
// condition when a selected workload references an object the WDS does not
// hold (spec.dependencies: Follow).
const DependencyReasonNotFound = "DependencyNotFound"

// MaxListedDependencies bounds status.dependencies; DependencyCount counts
// them all.
const MaxListedDependencies = 100

// DependencyReference names an object placed because a selected workload
// references it.
type DependencyReference struct {
	// APIGroup of the object ("" for the core group).
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Resource is the lower-case plural resource name.
	Resource string `json:"resource"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// DownsyncClause selects workload objects; every field given must hold.
// "*" in a list matches anything.
type DownsyncClause struct {
	// APIGroup of the objects ("" for the core group, "*" for any).
	// +optional
	APIGroup *string `json:"apiGroup,omitempty"`
	// Resources are lower-case plural resource names.
	Resources []string `json:"resources"`
	// Namespaces the objects are in; empty or "*" means any. Cluster-scoped
	// objects match only when Namespaces is empty or "*" and there are no
	// NamespaceSelectors.
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelectors select the namespaces, by their labels.
	// +optional
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors,omitempty"`
	// ObjectNames are the names of the objects.
	// +optional
	ObjectNames []string `json:"objectNames,omitempty"`
	// LabelSelectors select the objects by label; any may match.
	// +optional
	LabelSelectors []metav1.LabelSelector `json:"labelSelectors,omitempty"`
	// CreateOnly objects are created at the edge once and never overwritten
	// (unless another clause that selects them for the same destination is
	// not create-only).
	// +optional
	CreateOnly bool `json:"createOnly,omitempty"`
	// StatusCollectors name StatusCollectors that summarize the reported
	// state of the objects this clause selects.
	// +optional
	StatusCollectors []string `json:"statusCollectors,omitempty"`
}

// UpsyncClause selects edge objects to copy back to the WDS.
type UpsyncClause struct {
	APIGroup  string   `json:"apiGroup"`
	Resources []string `json:"resources"`
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// +optional
	Names []string `json:"names,omitempty"`
}

// Selects reports whether the clause selects an object of a resource:
// every field given must hold, "*" matches anything, and empty Namespaces
// or Names match any.
func (c UpsyncClause) Selects(group, resource, namespace, name string) bool {
	in := func(list []string, v string) bool {
		return len(list) == 0 || slices.Contains(list, "*") || slices.Contains(list, v)
	}
	return (c.APIGroup == "*" || c.APIGroup == group) &&
		slices.ContainsFunc(c.Resources, func(r string) bool { return r == "*" || r == resource }) &&
		in(c.Namespaces, namespace) && in(c.Names, name)
}

// Condition types and reasons of an EdgePlacement.
const (
	EdgePlacementReady         = "Ready"
	EdgePlacementMisconfigured = "Misconfigured"
	// EdgePlacementConflicted is True while, at some destination, an
	// object the placement selects is placed from another source and this
	// placement's copy is not written; its message names each such object,
	// the destination and the source that holds it. It is absent when there
	// is no conflict. The rule: the source whose copy a mailbox holds keeps
	// it while it still selects the object there; when none holds it, the
	// older EdgePlacement wins (creationTimestamp, then WDS, then name).
	EdgePlacementConflicted = "Conflicted"
	// EdgePlacementSynced is False while a syncer reports that it cannot
	// keep a copy of the placement in step at its edge (the reason is the
	// syncer's, such as MissingPermission or Rejected; the message names
	// the SyncTarget and the object), True when none does.
	EdgePlacementSynced = "Synced"
	// ConflictReasonOtherSpace: another WDS places an object of the same
	// group, resource, namespace and name at the same destination.
	ConflictReasonOtherSpace = "PlacedFromAnotherSpace"
	// ConflictReasonCustomization: another placement of the same WDS places
	// the same object at the same destination, customized differently (its
	// parameters come from another Location).
	ConflictReasonCustomization = "CustomizedDifferently"
)

// MailboxLimitReason is the reason of an EdgePlacement's Propagated
// condition when a copy was not written because the mailboxes of the
// destination's inventory space hold what its limit allows (a SpaceQuota's
// mailboxObjects or mailboxBytes). The server's refusal of the write names
// it as the type of a cause, so that the translator can tell it from other
// failures.
const MailboxLimitReason = "MailboxLimitExceeded"

// SourcePlacementAnnotation on a mailbox copy names the EdgePlacement (of
// the space SourceSpaceAnnotation names) whose copy it is. Only the server
// sets it; with the source space it decides who keeps a copy that several
// sources place (see EdgePlacementConflicted).
const SourcePlacementAnnotation = "edge.kubestellar.io/source-placement"

// EdgePlacementStatus reports how the placement is carried out.
type EdgePlacementStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// MatchingLocationCount is how many Locations the selectors match.
	// +optional
	MatchingLocationCount int32 `json:"matchingLocationCount"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Dependencies are the objects placed at some destination only because
	// a selected workload references them (spec.dependencies: Follow),
	// sorted, at most MaxListedDependencies (100) of them.
	// +optional
	Dependencies []DependencyReference `json:"dependencies,omitempty"`
	// DependencyCount is how many such objects there are.
	// +optional
	DependencyCount int32 `json:"dependencyCount,omitempty"`
}

// EdgePlacementList is a list of EdgePlacements.
//
// +kubebuilder:object:root=true
type EdgePlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EdgePlacement `json:"items"`
}

// SinglePlacementSlice lists the destinations of an EdgePlacement. The
// scheduler keeps one beside each EdgePlacement, of the same name, owned by it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=sps,categories=kubestellar
// +kubebuilder:printcolumn:name="Destinations",type=integer,JSONPath=`.destinationCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SinglePlacementSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Destinations []SinglePlacement `json:"destinations,omitempty"`
	// DestinationCount is len(destinations), for printing.
	// +optional
	DestinationCount int32 `json:"destinationCount"`
}

// SinglePlacement is one destination: a SyncTarget reached through a Location.
type SinglePlacement struct {
	// Space is the inventory space of the Location and SyncTarget.
	Space          string    `json:"space"`
	LocationName   string    `json:"locationName"`
	SyncTargetName string    `json:"syncTargetName"`
	SyncTargetUID  types.UID `json:"syncTargetUID"`
}

// SinglePlacementSliceList is a list of SinglePlacementSlices.
//
// +kubebuilder:object:root=true
type SinglePlacementSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SinglePlacementSlice `json:"items"`
}

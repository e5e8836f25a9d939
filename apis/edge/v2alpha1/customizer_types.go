// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package v2alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

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
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SyncerConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SyncerConfigSpec `json:"spec"`
	// Status is the syncer's: what it reports of the rollouts in
	// spec.rollouts.
	// +optional
	Status SyncerConfigStatus `json:"status,omitempty"`
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
	// Rollouts name, for each Progressive placement whose copies the
	// mailbox holds, the revision they are made from. A syncer that
	// reports rollouts says (in its SyncTarget's status.rollouts, with its
	// heartbeat; a syncer of the release before, in this object's status)
	// when the edge holds each revision's copies and whether they are
	// healthy: one report per mailbox and revision, where copies of a
	// placement carrying their revision would each be written again at
	// every revision and each reported on.
	// +optional
	Rollouts []RolloutRecord `json:"rollouts,omitempty"`
}

// RolloutRecord is the revision of a Progressive placement a mailbox's
// copies are made from.
type RolloutRecord struct {
	// Placement is the EdgePlacement, as WDS/NAME.
	Placement string `json:"placement"`
	// Revision is the placement's rollout revision.
	Revision string `json:"revision"`
	// Digest is CopiesDigest of the placement's copies of the revision in
	// the mailbox: a syncer whose copies have another digest has not seen
	// them all yet.
	Digest string `json:"digest"`
	// CRDs are the CRDs the revision places at the edge (spec.crds) for
	// the placement: a mailbox not yet admitted to a newer revision keeps
	// serving them as they are, and so does its edge.
	// +optional
	CRDs []string `json:"crds,omitempty"`
}

// SyncerConfigStatus is what the syncer reports.
type SyncerConfigStatus struct {
	// ReportsRollouts is set by a syncer that reports rollouts in
	// Rollouts; until it is (or its SyncTarget's status says it reports
	// there), the server has the syncer report on each copy of a
	// Progressive placement (AppliedAnnotation), as syncers before these
	// reports did. A syncer writes its reports here only when its server
	// keeps none in the SyncTarget's status (a server of the release
	// before).
	// +optional
	ReportsRollouts bool `json:"reportsRollouts,omitempty"`
	// Rollouts are the syncer's reports, one per record of spec.rollouts
	// it has read.
	// +optional
	Rollouts []RolloutReport `json:"rollouts,omitempty"`
}

// RolloutReport is a syncer's word on one record of spec.rollouts.
type RolloutReport struct {
	// Placement, Revision and Digest are the record's.
	Placement string `json:"placement"`
	Revision  string `json:"revision"`
	Digest    string `json:"digest"`
	// Applied: the edge holds every copy of the revision.
	// +optional
	Applied bool `json:"applied,omitempty"`
	// Healthy: every copy is applied and healthy by its kind (a
	// Deployment, StatefulSet or DaemonSet updated and available at its
	// current generation, a Job complete, anything else applied).
	// +optional
	Healthy bool `json:"healthy,omitempty"`
	// Message says what it waits for, when it is not healthy.
	// +optional
	Message string `json:"message,omitempty"`
	// Problem says which copy the edge refused, and why.
	// +optional
	Problem string `json:"problem,omitempty"`
}

// MaxRolloutReportMessage bounds a RolloutReport's Message and Problem,
// in bytes.
const MaxRolloutReportMessage = 512

// CopyDigestEntry is one copy as CopiesDigest sees it.
type CopyDigestEntry struct {
	// Resource is the copy's group and resource ("deployments.apps"):
	// the version it is read in does not matter.
	Resource, Namespace, Name string
	// ContentHash is the copy's ContentHashAnnotation.
	ContentHash string
}

// CopiesDigest identifies a set of copies by their keys and content
// hashes, in any order: the translator records it with a revision, the
// syncer computes it over the copies it reads.
func CopiesDigest(entries []CopyDigestEntry) string {
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = fmt.Sprintf("%d:%s|%d:%s/%s=%s", len(e.Resource), e.Resource, len(e.Namespace), e.Namespace, e.Name, e.ContentHash)
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
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

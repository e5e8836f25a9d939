// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

const (
	// FieldManager is the syncer's field manager at the edge and in the
	// mailbox.
	FieldManager = "kubestellar-syncer"
	// AppliedHashAnnotation on an edge object is the hash of the content the
	// syncer last applied; equal content is not applied again.
	AppliedHashAnnotation = "edge.kubestellar.io/applied-hash"
	// SyncTargetAnnotation on an edge object names the SyncTarget
	// ("inventory/name") whose syncer made it.
	SyncTargetAnnotation = "edge.kubestellar.io/sync-target"
	// UpsyncedLabel marks objects the syncer copied into the mailbox.
	UpsyncedLabel   = edgev2alpha1.UpsyncedLabel
	spaceAnnotation = "kubestellar.io/space"
)

// objKey identifies an object, in the mailbox and at the edge alike.
type objKey struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

func (k objKey) String() string {
	r := k.GVR.Resource
	if k.GVR.Group != "" {
		r += "." + k.GVR.Group
	}
	if k.Namespace == "" {
		return r + " " + k.Name
	}
	return r + " " + k.Namespace + "/" + k.Name
}

func keyOf(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) objKey {
	return objKey{GVR: gvr, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

var (
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	crdsGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// OwnerValue is the owner label's value for a SyncTarget: its name, or a
// hash of it where the name is not a valid label value.
func OwnerValue(inventorySpace, syncTarget string) string {
	if len(validation.IsValidLabelValue(syncTarget)) == 0 {
		return syncTarget
	}
	sum := sha256.Sum256([]byte(inventorySpace + "/" + syncTarget))
	return "st-" + hex.EncodeToString(sum[:12])
}

// desired is one object the edge should hold.
type desired struct {
	Key        objKey                     `json:"-"`
	Object     *unstructured.Unstructured `json:"object"`
	Hash       string                     `json:"hash"`
	CreateOnly bool                       `json:"createOnly,omitempty"`
	// Revision is the copy's rollout revision, when its placement is
	// Progressive (reported back in edgev2alpha1.AppliedAnnotation).
	Revision string `json:"revision,omitempty"`
	// ContentHash is the copy's edgev2alpha1.ContentHashAnnotation: a
	// rollout report (rollouts.go) counts the copy applied only when the
	// edge object was made from this very content.
	ContentHash string `json:"contentHash,omitempty"`
}

// serverFields are metadata the server sets; they never travel between
// clusters.
var serverFields = []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "selfLink", "ownerReferences", "finalizers"}

// edgeObject turns a mailbox copy into what the syncer applies at the edge:
// no server-set metadata, no status, none of the center's bookkeeping
// (labels and annotations of the edge.kubestellar.io prefix other than the
// source space), and the syncer's owner label and content hash.
func edgeObject(copy *unstructured.Unstructured, gvr schema.GroupVersionResource, owner, syncTarget string) (*desired, error) {
	obj := copy.DeepCopy()
	for _, f := range serverFields {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	if gvr == namespacesGVR {
		unstructured.RemoveNestedField(obj.Object, "spec")
	}
	createOnly := obj.GetAnnotations()[edgev2alpha1.CreateOnlyAnnotation] == "true"
	revision := obj.GetAnnotations()[edgev2alpha1.RevisionAnnotation]
	contentHash := obj.GetAnnotations()[edgev2alpha1.ContentHashAnnotation]
	annotations := map[string]string{}
	for k, v := range obj.GetAnnotations() {
		if k == spaceAnnotation || (strings.HasPrefix(k, "edge.kubestellar.io/") && k != edgev2alpha1.SourceSpaceAnnotation) {
			continue
		}
		annotations[k] = v
	}
	labels := map[string]string{}
	for k, v := range obj.GetLabels() {
		if k != edgev2alpha1.PlacementCopyLabel && k != UpsyncedLabel {
			labels[k] = v
		}
	}
	labels[edgev2alpha1.SyncerOwnerLabel] = owner
	annotations[SyncTargetAnnotation] = syncTarget
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", keyOf(gvr, copy), err)
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:16])
	annotations[AppliedHashAnnotation] = hash
	obj.SetAnnotations(annotations)
	return &desired{Key: keyOf(gvr, copy), Object: obj, Hash: hash, CreateOnly: createOnly, Revision: revision, ContentHash: contentHash}, nil
}

// ownedBy reports whether an edge object carries the owner label value.
func ownedBy(obj *unstructured.Unstructured, owner string) bool {
	return obj.GetLabels()[edgev2alpha1.SyncerOwnerLabel] == owner
}

// upsyncObject turns an edge object into its upsynced copy in the mailbox.
func upsyncObject(edge *unstructured.Unstructured) *unstructured.Unstructured {
	obj := edge.DeepCopy()
	for _, f := range serverFields {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	// kubestellar's labels and annotations are the server's to write: an
	// edge object carrying some (say, one upsynced from another level) goes
	// up without them.
	maps.DeleteFunc(labels, func(k, _ string) bool { return edgev2alpha1.IsKubestellarKey(k) })
	labels[UpsyncedLabel] = "true"
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	maps.DeleteFunc(annotations, func(k, _ string) bool { return edgev2alpha1.IsKubestellarKey(k) })
	delete(annotations, "kubectl.kubernetes.io/last-applied-configuration")
	obj.SetAnnotations(annotations)
	return obj
}

// sameUpsync reports whether a mailbox object already holds an upsynced
// edge object's content.
func sameUpsync(want, have *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := upsyncObject(u).Object
		delete(c, "apiVersion")
		delete(c, "kind")
		return c
	}
	a, _ := json.Marshal(strip(want))
	b, _ := json.Marshal(strip(have))
	return string(a) == string(b)
}

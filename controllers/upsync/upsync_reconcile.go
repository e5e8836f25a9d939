package upsync

import (
	"crypto/sha256"
	"encoding/hex"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

const (
	// UpsyncedLabel marks objects a syncer copied from its edge cluster into
	// its mailbox, and their copies in WDSes.
	UpsyncedLabel = edgev2alpha1.UpsyncedLabel
	// OriginalNameAnnotation on an upsynced object in a WDS is its name at the edge.
	OriginalNameAnnotation = "edge.kubestellar.io/original-name"
	// FieldManager writes upsynced objects into WDSes.
	FieldManager = "kubestellar-upsync"
)

// WDSName is the name an upsynced object gets in a WDS: its edge name with
// the SyncTarget's appended, so that two clusters upsyncing objects of the
// same name never collide. Names that would be too long for a DNS label
// are shortened with a hash.
func WDSName(name, syncTarget string) string {
	out := name + "-" + syncTarget
	if len(out) <= 63 {
		return out
	}
	sum := sha256.Sum256([]byte(out))
	return out[:54] + "-" + hex.EncodeToString(sum[:4])
}

// matches reports whether an upsync clause selects an object.
func matches(c edgev2alpha1.UpsyncClause, group, resource, namespace, name string) bool {
	return c.Selects(group, resource, namespace, name)
}

// wdsCopy returns the WDS version of an upsynced object.
func wdsCopy(obj *unstructured.Unstructured, invSpace, syncTarget string) *unstructured.Unstructured {
	out := obj.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "ownerReferences", "finalizers", "selfLink"} {
		unstructured.RemoveNestedField(out.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(out.Object, "status")
	out.SetName(WDSName(obj.GetName(), syncTarget))
	annotations := out.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, spaces.Annotation)
	annotations[edgev2alpha1.UpsyncedFromAnnotation] = invSpace + "/" + syncTarget
	annotations[OriginalNameAnnotation] = obj.GetName()
	out.SetAnnotations(annotations)
	labels := out.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[UpsyncedLabel] = "true"
	out.SetLabels(labels)
	return out
}

func equalJSON(a, b map[string]any) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

package dashboard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// Mailbox copies: the placement translator writes one per object, placement
// and destination into the destination's mailbox, naming its WDS
// (SourceSpaceAnnotation) and the placements that select it there
// (PlacementsAnnotation); the syncer writes back, into the same copy, why
// it cannot keep it in step at the edge (SyncErrorAnnotation) and the state
// of the object's pods and ReplicaSets there (AssociatedStateAnnotation).
// The dashboard keeps these annotations only, and counts them per
// placement and destination.

// copyKey names a mailbox copy.
type copyKey struct {
	mailbox, group, resource, namespace, name string
}

func (k copyKey) object() string {
	obj := k.resource
	if k.group != "" {
		obj += "." + k.group
	}
	obj += "/"
	if k.namespace != "" {
		obj += k.namespace + "/"
	}
	return obj + k.name
}

// copyRecord is a mailbox copy reduced to what the views show.
type copyRecord struct {
	wds        string
	placements []string
	// syncError is the syncer's "Reason: message" when it cannot keep the
	// copy in step at the edge.
	syncError string
	// associated is the state of the object's descendants at the edge;
	// nil when the syncer has not reported it (or it does not decode).
	associated *edgev2alpha1.AssociatedState
}

// copyAnnotations are the annotations a copy is reduced to.
var copyAnnotations = []string{spaces.Annotation, edgev2alpha1.SourceSpaceAnnotation, edgev2alpha1.PlacementsAnnotation,
	edgev2alpha1.SyncErrorAnnotation, edgev2alpha1.AssociatedStateAnnotation}

// reduceCopy keeps of a copy what the dashboard reads (its identity and
// copyAnnotations), so that the informers' caches stay small.
func reduceCopy(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	ann := map[string]string{}
	for _, k := range copyAnnotations {
		if v, ok := u.GetAnnotations()[k]; ok {
			ann[k] = v
		}
	}
	out.SetAnnotations(ann)
	return out
}

// copyOf reads a (reduced) copy.
func copyOf(u *unstructured.Unstructured) copyRecord {
	ann := u.GetAnnotations()
	r := copyRecord{wds: ann[edgev2alpha1.SourceSpaceAnnotation], syncError: ann[edgev2alpha1.SyncErrorAnnotation]}
	for p := range strings.SplitSeq(ann[edgev2alpha1.PlacementsAnnotation], ",") {
		if p = strings.TrimSpace(p); p != "" {
			r.placements = append(r.placements, p)
		}
	}
	slices.Sort(r.placements)
	if a := ann[edgev2alpha1.AssociatedStateAnnotation]; a != "" {
		var st edgev2alpha1.AssociatedState
		if json.Unmarshal([]byte(a), &st) == nil {
			r.associated = &st
		}
	}
	return r
}

func (r copyRecord) equal(o copyRecord) bool {
	if r.wds != o.wds || r.syncError != o.syncError || !slices.Equal(r.placements, o.placements) || (r.associated == nil) != (o.associated == nil) {
		return false
	}
	if r.associated == nil {
		return true
	}
	a, b := r.associated, o.associated
	return a.ReplicaSets == b.ReplicaSets && maps.Equal(a.PodPhases, b.PodPhases) && slices.Equal(a.NotReadyPods, b.NotReadyPods)
}

// copyTally counts the copies of one placement in one mailbox.
type copyTally struct {
	present int
	// failed maps each copy the syncer cannot keep in step to why.
	failed map[copyKey]string
}

// copyIndex tallies copies by placement (key(wds, placement)) and mailbox.
type copyIndex map[string]map[string]*copyTally

func (ix copyIndex) add(k copyKey, r copyRecord, delta int) {
	for _, p := range r.placements {
		pk := key(r.wds, p)
		byMailbox := ix[pk]
		if byMailbox == nil {
			byMailbox = map[string]*copyTally{}
			ix[pk] = byMailbox
		}
		t := byMailbox[k.mailbox]
		if t == nil {
			t = &copyTally{failed: map[copyKey]string{}}
			byMailbox[k.mailbox] = t
		}
		t.present += delta
		if r.syncError != "" {
			if delta > 0 {
				t.failed[k] = r.syncError
			} else {
				delete(t.failed, k)
			}
		}
		if t.present <= 0 {
			delete(byMailbox, k.mailbox)
			if len(byMailbox) == 0 {
				delete(ix, pk)
			}
		}
	}
}

// CopyCounts says whether a placement's copies at one destination are in
// step at the edge.
type CopyCounts struct {
	// Expected is how many copies the placement has at its fullest
	// destination: the translator writes the same selection to each, so a
	// destination with fewer is missing some (not written yet, held by
	// another source, or failed to customize).
	Expected int `json:"expected"`
	// InMailbox is how many are in the destination's mailbox.
	InMailbox int `json:"inMailbox"`
	// Synced: in the mailbox, the syncer connected and not reporting a
	// problem with them.
	Synced int `json:"synced"`
	// Failed: the syncer reports it cannot keep them in step.
	Failed int `json:"failed"`
	// Waiting: in the mailbox, but the edge's syncer is not connected (or
	// silent), so nothing says they are at the edge.
	Waiting int `json:"waiting"`
	// Missing is Expected − InMailbox.
	Missing int `json:"missing"`
	// Failures are the first few failed copies, with why.
	Failures []Problem `json:"failures,omitempty"`
	// Summary says it in words: "3/3 synced", "1/3 synced, 2 failed"...
	Summary string `json:"summary"`
}

// copiesAt counts the copies of a placement at a destination whose edge is
// in state, the placement having expected copies at its fullest.
func copiesAt(t *copyTally, expected int, state string) CopyCounts {
	c := CopyCounts{Expected: expected}
	if t != nil {
		c.InMailbox, c.Failed = t.present, len(t.failed)
		keys := slices.SortedFunc(maps.Keys(t.failed), func(a, b copyKey) int { return strings.Compare(a.object(), b.object()) })
		for _, k := range keys[:min(len(keys), maxProblemsShown)] {
			reason, message, _ := strings.Cut(t.failed[k], ": ")
			c.Failures = append(c.Failures, Problem{Object: k.object(), Reason: reason, Message: message})
		}
	}
	c.Missing = max(0, expected-c.InMailbox)
	inStep := max(0, c.InMailbox-c.Failed)
	if state == StateConnected {
		c.Synced = inStep
	} else {
		c.Waiting = inStep
	}
	switch {
	case expected == 0:
		c.Summary = "no copies"
	default:
		c.Summary = fmt.Sprintf("%d/%d synced", c.Synced, expected)
		for _, part := range []struct {
			n    int
			what string
		}{{c.Failed, "failed"}, {c.Missing, "missing"}, {c.Waiting, "waiting for the edge"}} {
			if part.n > 0 {
				c.Summary += fmt.Sprintf(", %d %s", part.n, part.what)
			}
		}
	}
	return c
}

// mailboxOf is the mailbox space of a destination.
func mailboxOf(d edgev2alpha1.SinglePlacement) string {
	return spaces.MailboxName(d.Space, string(d.SyncTargetUID))
}

// copyResource is the GroupResource of a copy informer.
func copyResource(r edgev2alpha1.SyncedResource) (schema.GroupVersionResource, bool) {
	gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
	return gvr, gvr.Version != "" && gvr.Resource != ""
}

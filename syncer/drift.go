// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// Drift is a change made at the edge to what the syncer manages there. What
// it manages is exactly what its server-side apply owns: the fields of its
// Apply entry in the object's managedFields. Server-side apply moves a
// field out of that entry when anyone else changes its value (an update,
// `kubectl scale`, `kubectl edit`, a forced apply) or removes it, and
// leaves the entry alone when others add fields of their own (an
// annotation), write the status, or set a field to the value it has. So
// the syncer records its entry after each apply, and an edge event whose
// object no longer has that entry (or no longer exists) is drift: the
// syncer applies again, which takes the fields back and leaves the others'
// fields alone, and counts it.
//
// A record is kept for this run only. After a restart the syncer applies
// each object it finds with the content it wants once: that is a no-op for
// the edge cluster (nothing changes, nothing restarts) unless the object
// drifted meanwhile, which the apply reverts and counts (the fields it took
// back say so).

// applied is what the syncer knows of an edge object since it last applied
// it: the content (hash) it applied, the object's UID, and its own
// managed-fields entry just after.
type applied struct {
	Hash   string
	UID    types.UID
	Fields string
}

// verdict is what reconcileDownsync does about one object.
type verdict int

const (
	// inStep: the edge object is as the syncer left it.
	inStep verdict = iota
	// applyDesired: the syncer's first apply of the object, or of new
	// content from the center; never drift.
	applyDesired
	// applyToVerify: the edge has the content but the syncer has no
	// record of applying it in this run (it restarted): one apply, a
	// no-op unless the object drifted while no one watched.
	applyToVerify
	// driftSuspected: changed or deleted at the edge since the syncer
	// applied it, going by the cache: read it afresh, and revert.
	driftSuspected
	// notOurs: an edge object of that name the syncer did not make.
	notOurs
)

func (v verdict) String() string {
	return [...]string{"inStep", "applyDesired", "applyToVerify", "driftSuspected", "notOurs"}[v]
}

// judge decides what to do about the edge object cur (nil: there is none)
// that should hold d, given the syncer's record of its last apply (nil:
// none in this run).
func judge(d *desired, cur *unstructured.Unstructured, rec *applied, owner string) verdict {
	if cur != nil && !ownedBy(cur, owner) && (rec == nil || cur.GetUID() != rec.UID) {
		// Not labelled as the syncer's, and not the object it made in
		// this run (whose owner label someone may have removed).
		return notOurs
	}
	if d.CreateOnly {
		// Made once, then left to the edge: only its absence matters.
		if cur == nil {
			return applyDesired
		}
		return inStep
	}
	if rec == nil {
		if cur != nil && cur.GetAnnotations()[AppliedHashAnnotation] == d.Hash {
			return applyToVerify
		}
		return applyDesired
	}
	if rec.Hash != d.Hash {
		// New content from the center (or the old again).
		return applyDesired
	}
	switch {
	case cur == nil:
		return driftSuspected
	case cur.GetUID() != rec.UID,
		cur.GetAnnotations()[AppliedHashAnnotation] != d.Hash,
		ownFields(cur) != rec.Fields:
		return driftSuspected
	}
	return inStep
}

// ownFields returns the syncer's Apply entry of an object's managed fields,
// as the server serializes it ("" when it has none).
func ownFields(obj *unstructured.Unstructured) string {
	var b strings.Builder
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			b.WriteString(e.FieldsV1.GetRawString())
		}
	}
	return b.String()
}

// reclaimed returns the fields (as paths, sorted) that the syncer's Apply
// entry holds in after but did not in before: what its apply took back
// from other writers, or put back where they had been removed.
func reclaimed(before, after *unstructured.Unstructured) ([]string, error) {
	set := func(obj *unstructured.Unstructured) (*fieldpath.Set, error) {
		s := &fieldpath.Set{}
		if obj == nil {
			return s, nil
		}
		if f := ownFields(obj); f != "" {
			if err := s.FromJSON(strings.NewReader(f)); err != nil {
				return nil, fmt.Errorf("reading the managed fields of %s: %w", obj.GetName(), err)
			}
		}
		return s, nil
	}
	b, err := set(before)
	if err != nil {
		return nil, err
	}
	a, err := set(after)
	if err != nil {
		return nil, err
	}
	var out []string
	for p := range a.Difference(b).Leaves().All() {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out, nil
}

// keepOwnManagedFields is the edge caches' transform: of an object's
// managed fields it keeps only the syncer's entries, which judge reads, and
// drops the others (most of their size).
func keepOwnManagedFields(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	var own []metav1.ManagedFieldsEntry
	for _, e := range u.GetManagedFields() {
		if e.Manager == FieldManager {
			own = append(own, e)
		}
	}
	u.SetManagedFields(own)
	return u, nil
}

// dropManagedFields is the other caches' transform. The mailbox's copies
// must not keep any: an update that carries managed fields replaces the
// object's.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}

// driftTally is what the SyncTarget's status has yet to hear of the
// reverts: how many since the last report, and the latest.
type driftTally struct {
	unreported int64
	last       *edgev2alpha1.DriftRevert
}

// add counts one revert.
func (t *driftTally) add(r edgev2alpha1.DriftRevert) {
	t.unreported++
	t.last = &r
}

// apply adds the tally to a SyncTarget's status and returns what it added,
// for reported to take off once the status is written.
func (t *driftTally) apply(st *edgev2alpha1.SyncTargetStatus) driftTally {
	if t.unreported == 0 && t.last == nil {
		return driftTally{}
	}
	if st.Drift == nil {
		st.Drift = &edgev2alpha1.SyncDrift{}
	}
	st.Drift.Reverted += t.unreported
	if t.last != nil {
		st.Drift.Last = t.last.DeepCopy()
	}
	return *t
}

// reported takes off what a written status holds; reverts counted
// meanwhile stay for the next report.
func (t *driftTally) reported(sent driftTally) {
	t.unreported -= sent.unreported
	if t.last == sent.last {
		t.last = nil
	}
}

// driftRevert describes one revert of key: the object was deleted, or
// fields were changed.
func driftRevert(key objKey, deleted bool, fields []string, now metav1.Time) edgev2alpha1.DriftRevert {
	r := edgev2alpha1.DriftRevert{Group: key.GVR.Group, Resource: key.GVR.Resource, Namespace: key.Namespace, Name: key.Name,
		Reason: edgev2alpha1.DriftChanged, Fields: fields, Time: now}
	if deleted {
		r.Reason, r.Fields = edgev2alpha1.DriftDeleted, nil
	}
	if len(r.Fields) > edgev2alpha1.MaxDriftFields {
		r.Fields = r.Fields[:edgev2alpha1.MaxDriftFields]
	}
	return r
}

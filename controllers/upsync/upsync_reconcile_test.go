// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package upsync

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

const mailbox = "inv1-mb-uid1"

// upsyncedCM is a ConfigMap in a space, as upsynced (with a value).
func upsyncedCM(space, ns, name, value string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"value": value}}}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{UpsyncedLabel: "true"})
	a := map[string]string{spaces.Annotation: space}
	for k, v := range annotations {
		a[k] = v
	}
	u.SetAnnotations(a)
	return u
}

func reports(wds, placement string, namespaces ...string) target {
	return target{wds: wds, placement: placement, clauses: []edgev2alpha1.UpsyncClause{{Resources: []string{"configmaps"}, Namespaces: namespaces}}}
}

// fakeDeps stubs the reconciler's dependencies and records every write, in order.
type fakeDeps struct {
	calls      []string
	noMailbox  bool
	targets    []target
	inMailbox  []*unstructured.Unstructured
	inWDS      []*unstructured.Unstructured
	notSynced  bool
	errs       map[string]error // by call, such as "apply wds1 reports/r-edge1"
	problems   map[string][]problem
	placements map[string]*edgev2alpha1.EdgePlacement
	dests      []string
	statuses   []*edgev2alpha1.EdgePlacement
}

func (f *fakeDeps) call(name string) error {
	f.calls = append(f.calls, name)
	return f.errs[name]
}

func (f *fakeDeps) reconciler() *reconciler {
	return &reconciler{
		syncTarget: func(inv, name string) (*edgev2alpha1.SyncTarget, bool) {
			if inv != "inv1" || name != "edge1" {
				return nil, false
			}
			st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid1")}}
			if !f.noMailbox {
				st.Status.MailboxSpace = spaces.MailboxName(inv, "uid1")
			}
			return st, true
		},
		targetsOf:      func(string, string) []target { return f.targets },
		knownResources: func() []schema.GroupVersionResource { return []schema.GroupVersionResource{configMaps} },
		resourceOf: func(_, group, resource string) (schema.GroupVersionResource, bool) {
			return configMaps, group == "" && resource == "configmaps"
		},
		synced: func(schema.GroupVersionResource, ...string) bool { return !f.notSynced },
		inMailbox: func(_ schema.GroupVersionResource, mb string) []*unstructured.Unstructured {
			if mb != mailbox {
				return nil
			}
			return f.inMailbox
		},
		copiedFrom: func(_ schema.GroupVersionResource, from string) []*unstructured.Unstructured {
			var out []*unstructured.Unstructured
			for _, u := range f.inWDS {
				if u.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation] == from {
					out = append(out, u)
				}
			}
			return out
		},
		current: func(_ schema.GroupVersionResource, wds, namespace, name string) *unstructured.Unstructured {
			for _, u := range f.inWDS {
				if spaceOf(u) == wds && u.GetNamespace() == namespace && u.GetName() == name {
					return u
				}
			}
			return nil
		},
		ensureNamespace: func(ctx context.Context, namespace string) error {
			return f.call("ensureNamespace " + spaceIn(ctx) + " " + namespace)
		},
		apply: func(ctx context.Context, _ schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			return f.call("apply " + spaceIn(ctx) + " " + obj.GetNamespace() + "/" + obj.GetName())
		},
		delete: func(ctx context.Context, _ schema.GroupVersionResource, namespace, name string) error {
			return f.call("delete " + spaceIn(ctx) + " " + namespace + "/" + name)
		},
		setProblems: func(syncTarget string, _ []target, found []problem) {
			if f.problems == nil {
				f.problems = map[string][]problem{}
			}
			f.problems[syncTarget] = found
		},
		placement: func(wds, name string) (*edgev2alpha1.EdgePlacement, bool) {
			ep, ok := f.placements[wds+"/"+name]
			return ep, ok
		},
		destinationsOf: func(string, string) []string { return f.dests },
		problemsOf: func(syncTarget string) ([]problem, bool) {
			found, ok := f.problems[syncTarget]
			return found, ok
		},
		updatePlacementStatus: func(_ context.Context, ep *edgev2alpha1.EdgePlacement) error {
			f.statuses = append(f.statuses, ep.DeepCopy())
			return f.call("updatePlacementStatus " + ep.Name)
		},
	}
}

func spaceIn(ctx context.Context) string {
	space, _ := spaces.FromContext(ctx)
	return space
}

func TestReconcile(t *testing.T) {
	from := map[string]string{edgev2alpha1.UpsyncedFromAnnotation: "inv1/edge1", OriginalNameAnnotation: "r"}
	inSync := func(wds string) *unstructured.Unstructured { return upsyncedCM(wds, "reports", "r-edge1", "v1", from) }
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "r-edge1", errors.New("namespace reports is being terminated"))
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		desc         string
		deps         fakeDeps
		wantRequeue  bool
		wantErr      error
		wantCalls    []string
		wantProblems []string // wds placements: message prefix
	}{
		{desc: "new object: namespace, then the object, in every WDS that selects it",
			deps: fakeDeps{targets: []target{reports("wds1", "a", "reports"), reports("wds1", "b"), reports("wds2", "c", "reports")},
				inMailbox: []*unstructured.Unstructured{upsyncedCM(mailbox, "reports", "r", "v1", nil)}},
			wantCalls: []string{"ensureNamespace wds1 reports", "apply wds1 reports/r-edge1", "ensureNamespace wds2 reports", "apply wds2 reports/r-edge1"}},
		{desc: "in step: nothing to write",
			deps: fakeDeps{targets: []target{reports("wds1", "a")}, inMailbox: []*unstructured.Unstructured{upsyncedCM(mailbox, "reports", "r", "v1", nil)},
				inWDS: []*unstructured.Unstructured{inSync("wds1")}}},
		{desc: "changed at the edge: applied again",
			deps: fakeDeps{targets: []target{reports("wds1", "a")}, inMailbox: []*unstructured.Unstructured{upsyncedCM(mailbox, "reports", "r", "v2", nil)},
				inWDS: []*unstructured.Unstructured{inSync("wds1")}},
			wantCalls: []string{"ensureNamespace wds1 reports", "apply wds1 reports/r-edge1"}},
		{desc: "no longer selected: deleted",
			deps: fakeDeps{targets: []target{reports("wds1", "a", "elsewhere")}, inMailbox: []*unstructured.Unstructured{upsyncedCM(mailbox, "reports", "r", "v1", nil)},
				inWDS: []*unstructured.Unstructured{inSync("wds1")}},
			wantCalls: []string{"delete wds1 reports/r-edge1"}},
		{desc: "the server's own copies in the mailbox are never upsynced",
			deps: fakeDeps{targets: []target{reports("wds1", "a")}, inMailbox: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				u := upsyncedCM(mailbox, "reports", "r", "v1", nil)
				u.SetLabels(map[string]string{UpsyncedLabel: "true", edgev2alpha1.PlacementCopyLabel: "true"})
				return u
			}()}}},
		{desc: "SyncTarget without its mailbox: what came from it goes",
			deps:      fakeDeps{noMailbox: true, targets: []target{reports("wds1", "a")}, inWDS: []*unstructured.Unstructured{inSync("wds1")}},
			wantCalls: []string{"delete wds1 reports/r-edge1"}},
		{desc: "cache not synced: look again later",
			deps:        fakeDeps{notSynced: true, targets: []target{reports("wds1", "a")}},
			wantRequeue: true},
		{desc: "refused: a problem for the placements that select it, the others still written, retried with backoff",
			deps: fakeDeps{targets: []target{reports("wds1", "a"), reports("wds1", "b"), reports("wds2", "c")},
				inMailbox: []*unstructured.Unstructured{upsyncedCM(mailbox, "reports", "r", "v1", nil)},
				errs:      map[string]error{"ensureNamespace wds1 reports": forbidden}},
			wantRequeue: true,
			wantCalls:   []string{"ensureNamespace wds1 reports", "ensureNamespace wds2 reports", "apply wds2 reports/r-edge1"},
			wantProblems: []string{`wds1 [a b]: configmaps reports/r upsynced from SyncTarget inv1/edge1 cannot be written into wds1 as reports/r-edge1: ` +
				`creating namespace reports: configmaps "r-edge1" is forbidden: namespace reports is being terminated`}},
		{desc: "fails otherwise: an error, retried, problems left as they were",
			deps: fakeDeps{targets: []target{reports("wds1", "a")}, inMailbox: []*unstructured.Unstructured{upsyncedCM(mailbox, "reports", "r", "v1", nil)},
				errs: map[string]error{"apply wds1 reports/r-edge1": errBoom}},
			wantErr:   errBoom,
			wantCalls: []string{"ensureNamespace wds1 reports", "apply wds1 reports/r-edge1"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := tc.deps
			key := spaces.Key("inv1", "", "edge1")
			requeue, err := f.reconciler().reconcile(context.Background(), key)
			require.Equal(t, tc.wantRequeue, requeue)
			require.ErrorIs(t, err, tc.wantErr)
			require.Equal(t, tc.wantCalls, f.calls)
			found, set := f.problems[key]
			require.Equal(t, tc.wantErr == nil && !f.notSynced, set, "problems are recorded after a complete pass only")
			var got []string
			for _, p := range found {
				got = append(got, fmt.Sprintf("%s %v: %s", p.wds, p.placements, p.message))
			}
			require.Equal(t, tc.wantProblems, got)
		})
	}
}

func TestReconcilePlacement(t *testing.T) {
	withUpsync := func(conds ...metav1.Condition) *edgev2alpha1.EdgePlacement {
		return &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 2},
			Spec:   edgev2alpha1.EdgePlacementSpec{Upsync: []edgev2alpha1.UpsyncClause{{Resources: []string{"configmaps"}}}},
			Status: edgev2alpha1.EdgePlacementStatus{Conditions: conds}}
	}
	upsynced := metav1.Condition{Type: epstatus.Upsynced, Status: metav1.ConditionTrue, Reason: reasonUpsynced,
		Message: "every selected edge object is in the workload description space", ObservedGeneration: 2}
	failed := metav1.Condition{Type: epstatus.Upsynced, Status: metav1.ConditionFalse, Reason: reasonUpsyncRefused, Message: "old", ObservedGeneration: 2}
	edge1, edge2 := spaces.Key("inv1", "", "edge1"), spaces.Key("inv1", "", "gone")
	p := func(wds, msg string, placements ...string) problem {
		return problem{wds: wds, placements: placements, message: msg}
	}
	for _, tc := range []struct {
		desc        string
		deps        fakeDeps
		wantRequeue bool
		wantCalls   []string
		want        *metav1.Condition
	}{
		{desc: "no upsync clauses, never reported: nothing",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"wds1/a": {ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}},
		{desc: "a destination not reconciled since start: wait",
			deps:        fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"wds1/a": withUpsync(failed)}, dests: []string{edge1}},
			wantRequeue: true},
		{desc: "a destination that does not exist is not waited for",
			deps:      fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"wds1/a": withUpsync()}, dests: []string{edge2}},
			wantCalls: []string{"updatePlacementStatus a"}, want: &upsynced},
		{desc: "no problem: True",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"wds1/a": withUpsync(failed)}, dests: []string{edge1},
				problems: map[string][]problem{edge1: {p("wds1", "of another placement", "b"), p("wds2", "of another WDS", "a")}}},
			wantCalls: []string{"updatePlacementStatus a"}, want: &upsynced},
		{desc: "already True: nothing to write",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"wds1/a": withUpsync(upsynced)}, dests: []string{edge1},
				problems: map[string][]problem{edge1: nil}}},
		{desc: "problems: False, counted, the first by message shown",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"wds1/a": withUpsync(upsynced)}, dests: []string{edge1},
				problems: map[string][]problem{edge1: {p("wds1", "z refused", "a", "b"), p("wds1", "m refused", "a")}}},
			wantCalls: []string{"updatePlacementStatus a"},
			want: &metav1.Condition{Type: epstatus.Upsynced, Status: metav1.ConditionFalse, Reason: reasonUpsyncRefused,
				Message: "2 objects not upsynced, such as: m refused", ObservedGeneration: 2}},
		{desc: "upsync clauses removed: the condition is still kept true to what is",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"wds1/a": {ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 2},
				Status: edgev2alpha1.EdgePlacementStatus{Conditions: []metav1.Condition{failed}}}}},
			wantCalls: []string{"updatePlacementStatus a"}, want: &upsynced},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := tc.deps
			requeue, err := f.reconciler().reconcilePlacement(context.Background(), spaces.Key("wds1", "", "a"))
			require.NoError(t, err)
			require.Equal(t, tc.wantRequeue, requeue)
			require.Equal(t, tc.wantCalls, f.calls)
			if tc.want == nil {
				return
			}
			got := meta.FindStatusCondition(f.statuses[0].Status.Conditions, epstatus.Upsynced)
			require.NotNil(t, got)
			got.LastTransitionTime = metav1.Time{}
			require.Equal(t, *tc.want, *got)
		})
	}
}

func TestProblemsSet(t *testing.T) {
	p := &problems{bySyncTarget: map[string][]problem{}}
	a, b := reports("wds1", "a"), reports("wds1", "b")
	refused := problem{wds: "wds1", placements: []string{"a"}, message: "refused"}

	_, seen := p.of("st1")
	require.False(t, seen)
	require.Equal(t, []string{"wds1|a", "wds1|b"}, keysOf(p.set("st1", []target{a, b}, nil)), "first reconcile: every placement targeting it")
	found, seen := p.of("st1")
	require.True(t, seen)
	require.Empty(t, found)
	require.Empty(t, p.set("st1", []target{a, b}, nil), "nothing changed")
	require.Equal(t, []string{"wds1|a"}, keysOf(p.set("st1", []target{a, b}, []problem{refused})))
	require.Empty(t, p.set("st1", []target{a, b}, []problem{refused}))
	c := reports("wds2", "c")
	require.Equal(t, []string{"wds2|c"}, keysOf(p.set("st1", []target{a, b, c}, []problem{refused})), "a placement newly targeting it")
	require.Equal(t, []string{"wds1|a"}, keysOf(p.set("st1", []target{a, b, c}, nil)), "cleared")
}

// keysOf shows placement keys as wds|name.
func keysOf(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		wds, _, name, err := spaces.SplitKey(k)
		if err != nil {
			out = append(out, "<"+err.Error()+">")
			continue
		}
		out = append(out, wds+"|"+name)
	}
	return out
}

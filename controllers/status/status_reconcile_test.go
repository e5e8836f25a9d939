// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// wdsObject is a WDS Deployment with a label value ("" for none), a status
// (nil for none) and the managed fields given.
func wdsObject(label string, status map[string]any, managed ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	u.SetNamespace("app")
	u.SetName("web")
	if label != "" {
		u.SetLabels(map[string]string{edgev2alpha1.ExecutingCountLabel: label})
	}
	if status != nil {
		u.Object["status"] = status
	}
	u.SetManagedFields(managed)
	return u
}

// statusEntry is a managedFields entry of the status subresource.
func statusEntry(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: "status", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(fields)}
}

var (
	ours       = statusEntry(FieldManager, metav1.ManagedFieldsOperationApply, `{"f:status":{"f:availableReplicas":{}}}`)
	oursByCSA  = statusEntry(FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:status":{"f:availableReplicas":{}}}`)
	oursEmpty  = statusEntry(FieldManager, metav1.ManagedFieldsOperationApply, `{}`)
	theirs     = statusEntry("someone-else", metav1.ManagedFieldsOperationUpdate, `{"f:status":{"f:availableReplicas":{}}}`)
	oursOnSpec = metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:kubestellar.io/executing-count":{}}}}`)}
)

// copyIn is a copy in a SyncTarget's mailbox, with its annotations and a
// reported status (nil for none).
func copyIn(syncTarget string, status map[string]any, annotations map[string]string) placedCopy {
	u := wdsObject("", status)
	a := map[string]string{edgev2alpha1.SourceSpaceAnnotation: "wds1"}
	for k, v := range annotations {
		a[k] = v
	}
	u.SetAnnotations(a)
	return placedCopy{gvr: deployments, mailbox: "inv1-mb-" + syncTarget, syncTarget: syncTarget, obj: u}
}

var singleton = map[string]string{edgev2alpha1.WantSingletonAnnotation: "true", edgev2alpha1.PlacementsAnnotation: "solo"}

func TestDecideSingleton(t *testing.T) {
	edge := map[string]any{"availableReplicas": int64(2)}
	stale := map[string]any{"availableReplicas": int64(1)}
	one, two := "1", "2"
	zero := "0"
	for _, tc := range []struct {
		desc   string
		obj    *unstructured.Unstructured
		copies []placedCopy
		want   singletonDecision
	}{
		{desc: "one destination reports: its status and 1",
			obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, singleton)},
			want: singletonDecision{setLabel: true, label: &one, apply: edge}},
		{desc: "already returned: nothing to write",
			obj: wdsObject("1", edge, ours), copies: []placedCopy{copyIn("edge1", edge, singleton)}},
		{desc: "the edge's status changed",
			obj: wdsObject("1", stale, ours), copies: []placedCopy{copyIn("edge1", edge, singleton)},
			want: singletonDecision{apply: edge}},
		{desc: "one destination that has not reported: the old status goes",
			obj: wdsObject("1", stale, ours), copies: []placedCopy{copyIn("edge2", nil, singleton)},
			want: singletonDecision{remove: true}},
		{desc: "several destinations, all reporting: the count, and the status goes",
			obj: wdsObject("1", edge, ours), copies: []placedCopy{copyIn("edge1", edge, singleton), copyIn("edge2", edge, singleton)},
			want: singletonDecision{setLabel: true, label: &two, remove: true}},
		{desc: "several destinations, one asks: singleton all the same",
			obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, nil), copyIn("edge2", edge, singleton)},
			want: singletonDecision{setLabel: true, label: &two}},
		{desc: "no destination left: 0, and the status goes",
			obj:  wdsObject("1", edge, ours),
			want: singletonDecision{setLabel: true, label: &zero, remove: true}},
		{desc: "no destination, already 0 and no status: nothing",
			obj: wdsObject("0", nil)},
		{desc: "never singleton, never placed: no label",
			obj: wdsObject("", nil)},
		{desc: "request withdrawn: no label, and the status goes",
			obj: wdsObject("1", edge, ours), copies: []placedCopy{copyIn("edge1", edge, nil)},
			want: singletonDecision{setLabel: true, remove: true}},
		{desc: "several destinations, empty status: nothing to remove",
			obj: wdsObject("2", map[string]any{}), copies: []placedCopy{copyIn("edge1", edge, singleton), copyIn("edge2", nil, singleton)}},
		{desc: "no singleton, a status: what the summarizer owns of it goes (managedFields decide)",
			obj: wdsObject("", edge), copies: []placedCopy{copyIn("edge1", edge, nil)},
			want: singletonDecision{remove: true}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := decideSingleton(tc.obj, tc.copies, rowsOf(tc.copies))
			require.Equal(t, tc.want, got)
		})
	}
}

func TestOwnsStatus(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		managed []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"applied", []metav1.ManagedFieldsEntry{ours}, true},
		{"updated", []metav1.ManagedFieldsEntry{oursByCSA}, true},
		{"someone else's", []metav1.ManagedFieldsEntry{theirs}, false},
		{"ours, not on the status subresource", []metav1.ManagedFieldsEntry{oursOnSpec}, false},
		{"ours, released", []metav1.ManagedFieldsEntry{oursEmpty}, false},
		{"ours, no fields", []metav1.ManagedFieldsEntry{{Manager: FieldManager, Subresource: "status"}}, false},
		{"ours, fields that do not decode", []metav1.ManagedFieldsEntry{statusEntry(FieldManager, metav1.ManagedFieldsOperationApply, `{`)}, false},
		{"none", nil, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, ownsStatus(wdsObject("", nil, tc.managed...)))
		})
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		annotations map[string]string
		want        []string // reason: message fragments
	}{
		{desc: "nothing to decode", annotations: map[string]string{edgev2alpha1.PlacementsAnnotation: "p1"}},
		{desc: "good annotations", annotations: map[string]string{edgev2alpha1.PlacementsAnnotation: "p1",
			edgev2alpha1.AssociatedStateAnnotation: `{"podPhases":{"Running":1}}`, edgev2alpha1.StatusCollectorsAnnotation: `{"p1":["a"]}`}},
		{desc: "associated state not JSON", annotations: map[string]string{edgev2alpha1.PlacementsAnnotation: "p1,p2",
			edgev2alpha1.AssociatedStateAnnotation: `{"podPhases":`},
			want: []string{"InvalidAssociatedState: deployments.apps app/web in the mailbox of SyncTarget edge1: annotation edge.kubestellar.io/associated-state (written by the syncer) is not a JSON object: unexpected end of JSON input"}},
		{desc: "associated state not an object", annotations: map[string]string{edgev2alpha1.PlacementsAnnotation: "p1,p2",
			edgev2alpha1.AssociatedStateAnnotation: `[1]`},
			want: []string{"InvalidAssociatedState: deployments.apps app/web in the mailbox of SyncTarget edge1: annotation edge.kubestellar.io/associated-state (written by the syncer) is not a JSON object: json: cannot unmarshal array"}},
		{desc: "both bad", annotations: map[string]string{edgev2alpha1.PlacementsAnnotation: "p1,p2",
			edgev2alpha1.AssociatedStateAnnotation: `x`, edgev2alpha1.StatusCollectorsAnnotation: `{"p1":"a"}`},
			want: []string{"InvalidAssociatedState: ", "InvalidStatusCollectors: deployments.apps app/web in the mailbox of SyncTarget edge1: annotation edge.kubestellar.io/status-collectors is not a JSON map of placement to StatusCollector names: json: cannot unmarshal string"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := decodeProblems(copyIn("edge1", nil, tc.annotations))
			require.Len(t, got, len(tc.want))
			for i, p := range got {
				require.Equal(t, []string{"p1", "p2"}, p.placements)
				require.True(t, strings.HasPrefix(p.reason+": "+p.message, tc.want[i]), "have %s: %s", p.reason, p.message)
			}
		})
	}
}

// fakeDeps stubs the reconciler's dependencies and records every write, in order.
type fakeDeps struct {
	calls []string
	// What the caches hold.
	obj *unstructured.Unstructured
	// What the server holds (with managedFields), when not obj.
	live       *unstructured.Unstructured
	notSynced  bool
	copies     []placedCopy
	combined   []*edgev2alpha1.CombinedStatus
	placements map[string]*edgev2alpha1.EdgePlacement
	// Remembered problems, as setWriteProblems received them.
	problems []problem
	// Errors returned by the writes, by call name.
	errs map[string]error
	// Written statuses.
	placementStatuses []*edgev2alpha1.EdgePlacement
}

func (f *fakeDeps) call(name string) error {
	f.calls = append(f.calls, name)
	return f.errs[strings.Fields(name)[0]]
}

func (f *fakeDeps) reconciler() *reconciler {
	return &reconciler{
		object: func(objectKey) (*unstructured.Unstructured, bool, bool) {
			return f.obj, f.obj != nil, !f.notSynced
		},
		copiesOf:   func(objectKey) []placedCopy { return f.copies },
		combinedIn: func(string) []*edgev2alpha1.CombinedStatus { return f.combined },
		summaries: func(_ context.Context, _ objectKey, placement string, names []string, _ map[string]any, rows []row) (
			[]edgev2alpha1.NamedStatusCombination, []summaryFailure, error) {
			var out []edgev2alpha1.NamedStatusCombination
			for _, n := range names {
				out = append(out, edgev2alpha1.NamedStatusCombination{Name: fmt.Sprintf("%s/%s/%d", placement, n, len(rows))})
			}
			return out, nil, nil
		},
		setSummaryFailures: func(context.Context, objectKey, []summaryFailure) {},
		setWriteProblems:   func(_ objectKey, problems []problem) { f.problems = problems },
		patchExecutingCount: func(_ context.Context, _ objectKey, value *string) error {
			if value == nil {
				return f.call("patchExecutingCount <remove>")
			}
			return f.call("patchExecutingCount " + *value)
		},
		applyStatus: func(_ context.Context, _ objectKey, _ *unstructured.Unstructured, status map[string]any) error {
			return f.call(fmt.Sprintf("applyStatus %v", status["availableReplicas"]))
		},
		live: func(context.Context, objectKey) (*unstructured.Unstructured, error) {
			if f.live != nil {
				return f.live, nil
			}
			return f.obj, nil
		},
		removeStatus: func(context.Context, objectKey, *unstructured.Unstructured) error { return f.call("removeStatus") },
		createCombined: func(_ context.Context, cs *edgev2alpha1.CombinedStatus) error {
			return f.call("createCombined " + cs.Namespace + "/" + cs.Name)
		},
		updateCombined: func(_ context.Context, cs *edgev2alpha1.CombinedStatus) error {
			return f.call("updateCombined " + cs.Namespace + "/" + cs.Name)
		},
		deleteCombined: func(_ context.Context, cs *edgev2alpha1.CombinedStatus) error {
			return f.call("deleteCombined " + cs.Namespace + "/" + cs.Name)
		},
		placement: func(wds, name string) (*edgev2alpha1.EdgePlacement, bool) {
			ep, ok := f.placements[name]
			return ep, ok && wds == "wds1"
		},
		copyProblemsOf: func(wds, placement string) []problem {
			var out []problem
			for _, cp := range f.copies {
				for _, p := range decodeProblems(cp) {
					if slices.Contains(p.placements, placement) {
						out = append(out, p)
					}
				}
			}
			return out
		},
		writeProblemsOf: func(_, placement string) []problem {
			var out []problem
			for _, p := range f.problems {
				if slices.Contains(p.placements, placement) {
					out = append(out, p)
				}
			}
			return out
		},
		updatePlacementStatus: func(_ context.Context, ep *edgev2alpha1.EdgePlacement) error {
			f.placementStatuses = append(f.placementStatuses, ep.DeepCopy())
			return f.call("updatePlacementStatus " + ep.Name)
		},
	}
}

var webKey = objectKey{wds: "wds1", gvr: deployments, namespace: "app", name: "web"}

func invalid(what string) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web",
		field.ErrorList{field.Invalid(field.NewPath("status", "replicas"), -1, what)})
}

func TestReconcile(t *testing.T) {
	edge := map[string]any{"availableReplicas": int64(2)}
	collectors := map[string]string{edgev2alpha1.PlacementsAnnotation: "common", edgev2alpha1.StatusCollectorsAnnotation: `{"common":["available"]}`}
	errBoom := errors.New("boom")
	alreadyExists := apierrors.NewAlreadyExists(schema.GroupResource{Group: "edge.kubestellar.io", Resource: "combinedstatuses"}, "common.deployments.web")
	for _, tc := range []struct {
		desc         string
		deps         fakeDeps
		wantRequeue  bool
		wantErr      error
		wantCalls    []string
		wantProblems []string // reason: message prefix
	}{
		{desc: "cache not synced: look again later", deps: fakeDeps{notSynced: true}, wantRequeue: true},
		{desc: "object gone: its CombinedStatuses go",
			deps: fakeDeps{combined: []*edgev2alpha1.CombinedStatus{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "common.deployments.web"}, ObjectRef: edgev2alpha1.ObjectReference{Group: "apps", Resource: "deployments", Namespace: "app", Name: "web"}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "common.deployments.other"}, ObjectRef: edgev2alpha1.ObjectReference{Group: "apps", Resource: "deployments", Namespace: "app", Name: "other"}},
			}},
			wantCalls: []string{"deleteCombined app/common.deployments.web"}},
		{desc: "singleton on one destination: label, then status",
			deps:      fakeDeps{obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, singleton)}},
			wantCalls: []string{"patchExecutingCount 1", "applyStatus 2"}},
		{desc: "singleton on two: label, then the summarizer's status goes",
			deps:      fakeDeps{obj: wdsObject("1", edge, ours), copies: []placedCopy{copyIn("edge1", edge, singleton), copyIn("edge2", edge, singleton)}},
			wantCalls: []string{"patchExecutingCount 2", "removeStatus"}},
		{desc: "singleton request withdrawn",
			deps:      fakeDeps{obj: wdsObject("1", edge, ours), copies: []placedCopy{copyIn("edge1", edge, nil)}},
			wantCalls: []string{"patchExecutingCount <remove>", "removeStatus"}},
		{desc: "singleton on two, the status someone else's: it stays",
			deps: fakeDeps{obj: wdsObject("2", edge), live: wdsObject("2", edge, theirs, oursOnSpec),
				copies: []placedCopy{copyIn("edge1", edge, singleton), copyIn("edge2", edge, singleton)}}},
		{desc: "no singleton, status written by an update of an older server: it goes",
			deps:      fakeDeps{obj: wdsObject("", edge), live: wdsObject("", edge, oursByCSA), copies: []placedCopy{copyIn("edge1", edge, nil)}},
			wantCalls: []string{"removeStatus"}},
		{desc: "no destination, nothing of the status owned any more: it stays",
			deps: fakeDeps{obj: wdsObject("0", edge), live: wdsObject("0", edge, oursEmpty, theirs)}},
		{desc: "label write fails: retried, nothing else written",
			deps:      fakeDeps{obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, singleton)}, errs: map[string]error{"patchExecutingCount": errBoom}},
			wantCalls: []string{"patchExecutingCount 1"}, wantErr: errBoom},
		{desc: "status refused: a problem for the copy's placements, not a retry",
			deps:         fakeDeps{obj: wdsObject("1", nil), copies: []placedCopy{copyIn("edge1", edge, singleton)}, errs: map[string]error{"applyStatus": invalid("must be positive")}},
			wantCalls:    []string{"applyStatus 2"},
			wantProblems: []string{"StatusRejected: deployments.apps app/web: the status reported by SyncTarget edge1 cannot be written: Deployment.apps \"web\" is invalid"}},
		{desc: "status write fails otherwise: retried",
			deps:      fakeDeps{obj: wdsObject("1", nil), copies: []placedCopy{copyIn("edge1", edge, singleton)}, errs: map[string]error{"applyStatus": errBoom}},
			wantCalls: []string{"applyStatus 2"}, wantErr: errBoom},
		{desc: "kind without a status subresource: nothing to report",
			deps:      fakeDeps{obj: wdsObject("1", nil), copies: []placedCopy{copyIn("edge1", edge, singleton)}, errs: map[string]error{"applyStatus": apierrors.NewNotFound(schema.GroupResource{}, "web")}},
			wantCalls: []string{"applyStatus 2"}},
		{desc: "collectors: a CombinedStatus per placement",
			deps:      fakeDeps{obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, collectors), copyIn("edge2", nil, collectors)}},
			wantCalls: []string{"createCombined app/common.deployments.web"}},
		{desc: "collectors: an unchanged CombinedStatus is left alone",
			deps: fakeDeps{obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, collectors)}, combined: []*edgev2alpha1.CombinedStatus{{
				ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "common.deployments.web"},
				ObjectRef:  edgev2alpha1.ObjectReference{Group: "apps", Resource: "deployments", Namespace: "app", Name: "web"},
				Placement:  "common", Results: []edgev2alpha1.NamedStatusCombination{{Name: "common/available/1"}}}}}},
		{desc: "collectors: an undecodable annotation counts as none (reported on the placement)",
			deps: fakeDeps{obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, map[string]string{
				edgev2alpha1.PlacementsAnnotation: "common", edgev2alpha1.StatusCollectorsAnnotation: `{`})}}},
		{desc: "CombinedStatus made but not in the cache yet: retried, to compare with it then",
			deps: fakeDeps{obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, collectors)},
				errs: map[string]error{"createCombined": alreadyExists}},
			wantCalls: []string{"createCombined app/common.deployments.web"},
			wantErr:   alreadyExists},
		{desc: "CombinedStatus refused: a problem for its placement",
			deps:         fakeDeps{obj: wdsObject("", nil), copies: []placedCopy{copyIn("edge1", edge, collectors)}, errs: map[string]error{"createCombined": invalid("too large")}},
			wantCalls:    []string{"createCombined app/common.deployments.web"},
			wantProblems: []string{"CombinedStatusRejected: CombinedStatus app/common.deployments.web of deployments.apps app/web cannot be written"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := tc.deps
			f.problems = []problem{{placements: []string{"stale"}}}
			requeue, err := f.reconciler().reconcile(context.Background(), webKey)
			require.Equal(t, tc.wantRequeue, requeue)
			require.ErrorIs(t, err, tc.wantErr)
			require.Equal(t, tc.wantCalls, f.calls)
			if tc.wantRequeue || tc.wantErr != nil {
				return
			}
			require.Len(t, f.problems, len(tc.wantProblems), "remembered problems: %+v", f.problems)
			for i, p := range f.problems {
				require.True(t, strings.HasPrefix(p.reason+": "+p.message, tc.wantProblems[i]), "have %s: %s", p.reason, p.message)
			}
		})
	}
}

func TestReconcilePlacement(t *testing.T) {
	asks := func(name string, singleton bool, conds ...metav1.Condition) *edgev2alpha1.EdgePlacement {
		return &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3},
			Spec: edgev2alpha1.EdgePlacementSpec{WantSingletonReportedState: singleton}, Status: edgev2alpha1.EdgePlacementStatus{Conditions: conds}}
	}
	returned := metav1.Condition{Type: epstatus.StatusReturned, Status: metav1.ConditionTrue, Reason: reasonReturned,
		Message: "what the destinations report is read and written back", ObservedGeneration: 3}
	failing := metav1.Condition{Type: epstatus.StatusReturned, Status: metav1.ConditionFalse, Reason: reasonInvalidAssociatedState, Message: "old", ObservedGeneration: 3}
	bad := map[string]string{edgev2alpha1.PlacementsAnnotation: "solo", edgev2alpha1.AssociatedStateAnnotation: `{`}
	for _, tc := range []struct {
		desc      string
		deps      fakeDeps
		wantCalls []string
		want      *metav1.Condition // status, reason, message prefix
	}{
		{desc: "placement gone", deps: fakeDeps{}},
		{desc: "asks for reported state, no problem: True",
			deps:      fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"solo": asks("solo", true)}},
			wantCalls: []string{"updatePlacementStatus solo"}, want: &returned},
		{desc: "already True: nothing to write",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"solo": asks("solo", true, returned)}}},
		{desc: "asks for nothing, no problem: no condition",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"solo": asks("solo", false)}}},
		{desc: "asks for nothing, a copy's annotation does not decode: False",
			deps:      fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"solo": asks("solo", false)}, copies: []placedCopy{copyIn("edge1", nil, bad)}},
			wantCalls: []string{"updatePlacementStatus solo"},
			want:      &metav1.Condition{Status: metav1.ConditionFalse, Reason: reasonInvalidAssociatedState, Message: "deployments.apps app/web in the mailbox of SyncTarget edge1: annotation"}},
		{desc: "problems counted, the first by message shown",
			deps: fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"solo": asks("solo", true)},
				copies:   []placedCopy{copyIn("edge2", nil, bad), copyIn("edge1", nil, bad)},
				problems: []problem{{placements: []string{"solo"}, reason: reasonStatusRejected, message: "zzz last"}, {placements: []string{"other"}, reason: "X", message: "a other"}}},
			wantCalls: []string{"updatePlacementStatus solo"},
			want:      &metav1.Condition{Status: metav1.ConditionFalse, Reason: reasonInvalidAssociatedState, Message: "3 problems, such as: deployments.apps app/web in the mailbox of SyncTarget edge1"}},
		{desc: "the failure cleared: True again",
			deps:      fakeDeps{placements: map[string]*edgev2alpha1.EdgePlacement{"solo": asks("solo", false, failing)}},
			wantCalls: []string{"updatePlacementStatus solo"}, want: &returned},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := tc.deps
			require.NoError(t, f.reconciler().reconcilePlacement(context.Background(), spaces.Key("wds1", "", "solo")))
			require.Equal(t, tc.wantCalls, f.calls)
			if tc.want == nil {
				return
			}
			got := meta.FindStatusCondition(f.placementStatuses[0].Status.Conditions, epstatus.StatusReturned)
			require.NotNil(t, got)
			require.Equal(t, tc.want.Status, got.Status)
			require.Equal(t, tc.want.Reason, got.Reason)
			require.True(t, strings.HasPrefix(got.Message, tc.want.Message), "message %q", got.Message)
			require.Equal(t, int64(3), got.ObservedGeneration)
			require.Nil(t, meta.FindStatusCondition(f.placementStatuses[0].Status.Conditions, edgev2alpha1.EdgePlacementReady),
				"StatusReturned does not touch Ready")
		})
	}
}

func TestWriteProblems(t *testing.T) {
	w := newProblemIndex[objectKey]()
	other := objectKey{wds: "wds2", gvr: deployments, namespace: "app", name: "web"}
	p1 := problem{placements: []string{"a", "b"}, reason: "R", message: "m1"}
	p2 := problem{placements: []string{"b"}, reason: "R", message: "m2"}

	key := func(wds, ep string) string { return spaces.Key(wds, "", ep) }
	require.Empty(t, w.set(webKey, webKey.wds, nil), "nothing before, nothing now")
	require.Equal(t, []string{key("wds1", "a"), key("wds1", "b")}, w.set(webKey, webKey.wds, []problem{p1}))
	require.Empty(t, w.set(webKey, webKey.wds, []problem{p1}), "unchanged")
	require.Equal(t, []string{key("wds2", "b")}, w.set(other, other.wds, []problem{p2}))
	require.Equal(t, []problem{p1}, w.of("wds1", "a"))
	require.Equal(t, []problem{p1}, w.of("wds1", "b"))
	require.Equal(t, []problem{p2}, w.of("wds2", "b"))
	require.Equal(t, []string{key("wds1", "a"), key("wds1", "b")}, w.set(webKey, webKey.wds, nil), "cleared: the placements it concerned")
	require.Empty(t, w.of("wds1", "a"))
}

// TestCopyProblems: what the copies' events record, and the placements
// each change concerns. A copy whose annotations decode costs nothing: its
// placements are not reconciled again for it.
func TestCopyProblems(t *testing.T) {
	x := newProblemIndex[copyRef]()
	ref := copyRef{gvr: deployments, space: "inv1-mb-edge1", namespace: "app", name: "web"}
	good := copyIn("edge1", nil, map[string]string{edgev2alpha1.PlacementsAnnotation: "p1,p2", edgev2alpha1.AssociatedStateAnnotation: `{}`})
	bad := copyIn("edge1", nil, map[string]string{edgev2alpha1.PlacementsAnnotation: "p1,p2", edgev2alpha1.AssociatedStateAnnotation: `{`})
	set := func(cp placedCopy) []string { return x.set(ref, "wds1", decodeProblems(cp)) }

	require.Empty(t, set(good), "a copy that decodes concerns no placement")
	require.Empty(t, x.of("wds1", "p1"))
	require.Equal(t, []string{spaces.Key("wds1", "", "p1"), spaces.Key("wds1", "", "p2")}, set(bad))
	require.Len(t, x.of("wds1", "p1"), 1)
	require.Len(t, x.of("wds1", "p2"), 1)
	require.Empty(t, x.of("wds1", "p3"))
	require.Empty(t, x.of("wds2", "p1"), "another WDS's placement of the same name")
	require.Empty(t, set(bad), "the same problems again: nothing to reconcile")
	// The caller may sort what it gets: the index keeps its own.
	got := x.of("wds1", "p1")
	got[0].message = "changed by the caller"
	require.NotEqual(t, "changed by the caller", x.of("wds1", "p1")[0].message)

	// Fixed, or gone: the placements are reconciled once more, and the
	// problem is forgotten.
	require.Equal(t, []string{spaces.Key("wds1", "", "p1"), spaces.Key("wds1", "", "p2")}, set(good))
	require.Empty(t, x.of("wds1", "p1"))
	require.Empty(t, x.byKey)
	set(bad)
	require.Len(t, x.set(ref, "", nil), 2, "a copy that went")
	require.Empty(t, x.byKey)
}

func TestDecodeProblemsWithoutSyncTarget(t *testing.T) {
	cp := copyIn("", nil, map[string]string{edgev2alpha1.PlacementsAnnotation: "p1", edgev2alpha1.AssociatedStateAnnotation: `{`})
	got := decodeProblems(cp)
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0].message, "deployments.apps app/web in mailbox inv1-mb-: annotation"), got[0].message)
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

// FieldManager writes the executing-count label and the singleton status
// of WDS objects. The status is server-side applied under this name, so
// that the API server records exactly which status fields the summarizer
// wrote (and still owns): the only ones it ever removes.
const FieldManager = "kubestellar-status"

// Reasons of the StatusReturned condition of an EdgePlacement.
const (
	reasonReturned = "Returned"
	// reasonInvalidAssociatedState: a syncer wrote an associated-state
	// annotation that is not a JSON object.
	reasonInvalidAssociatedState = "InvalidAssociatedState"
	// reasonInvalidStatusCollectors: a copy's status-collectors annotation
	// is not a JSON map of placement to names.
	reasonInvalidStatusCollectors = "InvalidStatusCollectors"
	// reasonStatusRejected: the API server refused the singleton status
	// (for example, it does not validate against the WDS object's schema).
	reasonStatusRejected = "StatusRejected"
	// reasonCombinedStatusRejected: the API server refused a CombinedStatus.
	reasonCombinedStatusRejected = "CombinedStatusRejected"
)

// placedCopy is a copy of a WDS object in the mailbox of a SyncTarget.
type placedCopy struct {
	gvr        schema.GroupVersionResource
	mailbox    string
	syncTarget string
	// obj is the copy as the cache gives it: an unstructured object, or
	// the record an event handler sees (crossspace.Copy).
	obj metav1.Object
}

// problem is a failure to read or write back what the destinations of an
// object report, shown on the placements concerned.
type problem struct {
	// placements are the names, in the object's WDS, of the placements
	// concerned.
	placements []string
	reason     string
	message    string
}

// reconciler is the logic of the controller; its dependencies are function
// fields so that tests can stub them.
type reconciler struct {
	// object returns a WDS object; synced is false while the cache of its
	// resource is not ready.
	object func(key objectKey) (obj *unstructured.Unstructured, exists, synced bool)
	// copiesOf returns the copies of a WDS object in SyncTargets'
	// mailboxes, sorted by mailbox.
	copiesOf func(key objectKey) []placedCopy
	// combinedIn returns the CombinedStatuses of a WDS.
	combinedIn func(wds string) []*edgev2alpha1.CombinedStatus
	// summaries runs the named StatusCollectors over the rows of one
	// (object, placement); an error means ctx ended.
	summaries func(ctx context.Context, key objectKey, placement string, names []string, obj map[string]any, rows []row) (
		[]edgev2alpha1.NamedStatusCombination, []summaryFailure, error)
	// setSummaryFailures remembers the summaries a limit stopped.
	setSummaryFailures func(ctx context.Context, key objectKey, failures []summaryFailure)
	// setWriteProblems remembers the writes of an object the server
	// refused (none: nil).
	setWriteProblems func(key objectKey, problems []problem)

	// patchExecutingCount sets the label (nil removes it).
	patchExecutingCount func(ctx context.Context, key objectKey, value *string) error
	// applyStatus server-side applies a status as FieldManager.
	applyStatus func(ctx context.Context, key objectKey, obj *unstructured.Unstructured, status map[string]any) error
	// live reads a WDS object from the server, with its managedFields
	// (which the caches drop).
	live func(ctx context.Context, key objectKey) (*unstructured.Unstructured, error)
	// removeStatus releases the status fields FieldManager owns in the
	// live object; the API server removes those nobody else owns.
	removeStatus   func(ctx context.Context, key objectKey, live *unstructured.Unstructured) error
	createCombined func(ctx context.Context, cs *edgev2alpha1.CombinedStatus) error
	updateCombined func(ctx context.Context, cs *edgev2alpha1.CombinedStatus) error
	deleteCombined func(ctx context.Context, cs *edgev2alpha1.CombinedStatus) error

	// placement returns an EdgePlacement of a WDS.
	placement func(wds, name string) (*edgev2alpha1.EdgePlacement, bool)
	// copyProblemsOf returns the problems of the copies that name a
	// placement in their placements annotation (annotations that do not
	// decode), as the copies' events recorded them: a fresh slice.
	copyProblemsOf func(wds, placement string) []problem
	// writeProblemsOf returns the remembered write problems that concern
	// a placement.
	writeProblemsOf func(wds, placement string) []problem
	// updatePlacementStatus writes an EdgePlacement's status.
	updatePlacementStatus func(ctx context.Context, ep *edgev2alpha1.EdgePlacement) error

	// collector returns a StatusCollector of a WDS.
	collector func(wds, name string) (*edgev2alpha1.StatusCollector, bool)
	// collectorCondition is a StatusCollector's Ready condition.
	collectorCondition func(sc *edgev2alpha1.StatusCollector) metav1.Condition
	// updateCollectorStatus writes a StatusCollector's status.
	updateCollectorStatus func(ctx context.Context, sc *edgev2alpha1.StatusCollector) error
}

// reconcile returns what the copies of one WDS object report.
func (r *reconciler) reconcile(ctx context.Context, key objectKey) (requeue bool, err error) {
	obj, exists, synced := r.object(key)
	if !synced {
		return true, nil
	}
	wctx := spaces.WithSpace(ctx, key.wds)
	if !exists {
		r.setSummaryFailures(ctx, key, nil)
		r.setWriteProblems(key, nil)
		return false, r.pruneCombined(wctx, key, nil)
	}
	copies := r.copiesOf(key)
	rows := rowsOf(copies)
	var problems []problem
	refused, err := r.returnSingleton(wctx, key, obj, copies, rows)
	if err != nil {
		return false, err
	}
	problems = append(problems, refused...)
	refused, err = r.writeCombined(wctx, key, obj, copies, rows)
	if err != nil {
		return false, err
	}
	r.setWriteProblems(key, append(problems, refused...))
	return false, nil
}

// rowsOf is what the StatusCollectors see of each copy. An annotation that
// does not decode counts as absent here; reconcilePlacement reports it.
//
// A row's Status and Associated are shared (with the cache, and between
// rows whose copies carry the same annotation, decoded once): readers must
// not change them.
func rowsOf(copies []placedCopy) []row {
	rows := make([]row, 0, len(copies))
	decoded := map[string]map[string]any{}
	for _, cp := range copies {
		r := row{Inventory: cp.syncTarget}
		if s, ok := crossspace.StatusOf(cp.obj).(map[string]any); ok && len(s) > 0 {
			r.Status = s
		}
		text := crossspace.Annotation(cp.obj, edgev2alpha1.AssociatedStateAnnotation)
		associated, ok := decoded[text]
		if !ok {
			associated, _ = decodeAssociatedState(text)
			decoded[text] = associated
		}
		r.Associated = associated
		rows = append(rows, r)
	}
	return rows
}

// associatedState decodes the associated-state annotation a syncer
// writes (nil when absent).
func associatedState(obj metav1.Object) (map[string]any, error) {
	return decodeAssociatedState(crossspace.Annotation(obj, edgev2alpha1.AssociatedStateAnnotation))
}

// decodeAssociatedState decodes the text of an associated-state
// annotation (nil when empty).
func decodeAssociatedState(a string) (map[string]any, error) {
	if a == "" {
		return nil, nil
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(a), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// statusCollectors decodes the status-collectors annotation the placement
// translator writes: placement -> StatusCollector names.
func statusCollectors(obj metav1.Object) (map[string][]string, error) {
	return decodeStatusCollectors(crossspace.Annotation(obj, edgev2alpha1.StatusCollectorsAnnotation))
}

// decodeStatusCollectors decodes the text of a status-collectors
// annotation.
func decodeStatusCollectors(a string) (map[string][]string, error) {
	if a == "" {
		return nil, nil
	}
	var out map[string][]string
	if err := json.Unmarshal([]byte(a), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// placementsOf lists the placements a copy's annotation names.
func placementsOf(obj metav1.Object) []string {
	var out []string
	for _, ep := range strings.Split(crossspace.Annotation(obj, edgev2alpha1.PlacementsAnnotation), ",") {
		if ep != "" {
			out = append(out, ep)
		}
	}
	return out
}

// singletonDecision is what returnSingleton writes.
type singletonDecision struct {
	// setLabel says whether the executing-count label changes: to label,
	// or removed when label is nil.
	setLabel bool
	label    *string
	// apply is the status to write (nil: none).
	apply map[string]any
	// remove says the status the summarizer wrote, if any, goes: the
	// object has a status, and whether the summarizer owns any of it is
	// in managedFields (ownsStatus), which only the live object has.
	remove bool
}

// decideSingleton decides the executing-count label and the singleton
// status of a WDS object from its copies (rows are theirs).
//
// The object wants the singleton reported state when a copy says so
// (edge.kubestellar.io/want-singleton, which the placement translator sets
// for placements with wantSingletonReportedState), or when it has no copy
// left and still carries the label: no copy can say it then, and "0" is
// true whatever placement comes next.
//
// While it wants it, the label is the number of destinations (SyncTargets
// whose mailbox holds a copy), reported or not: "0" on none, "1" on one,
// "N" on several. Only on exactly one destination that has reported is the
// status the edge's; in every other case (none, several, one that has not
// reported yet, or the request withdrawn) the status the summarizer wrote
// is removed, so that it is never stale. What others wrote stays: the
// summarizer removes only what managedFields says it owns.
func decideSingleton(obj *unstructured.Unstructured, copies []placedCopy, rows []row) singletonDecision {
	want := false
	for _, cp := range copies {
		want = want || crossspace.Annotation(cp.obj, edgev2alpha1.WantSingletonAnnotation) == "true"
	}
	current, labelled := obj.GetLabels()[edgev2alpha1.ExecutingCountLabel]
	if len(copies) == 0 && labelled {
		want = true
	}
	var d singletonDecision
	switch {
	case want:
		count := strconv.Itoa(len(copies))
		if !labelled || current != count {
			d.setLabel, d.label = true, &count
		}
	case labelled:
		d.setLabel = true
	}
	if want && len(copies) == 1 && rows[0].Status != nil {
		status, _ := obj.Object["status"].(map[string]any)
		if !apiequality.Semantic.DeepEqual(status, rows[0].Status) {
			d.apply = rows[0].Status
		}
		return d
	}
	status, _ := obj.Object["status"].(map[string]any)
	d.remove = len(status) > 0
	return d
}

// ownsStatus reports whether managedFields says FieldManager owns any
// field of the object's status, written through the status subresource
// (by server-side apply, or by an update before the summarizer applied).
func ownsStatus(obj *unstructured.Unstructured) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != FieldManager || e.Subresource != "status" || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		var status map[string]json.RawMessage
		if raw, ok := fields["f:status"]; ok && json.Unmarshal(raw, &status) == nil && len(status) > 0 {
			return true
		}
	}
	return false
}

// returnSingleton maintains the executing-count label and the singleton
// status (see decideSingleton). A status the server refuses is returned
// as a problem for the placements of the copy.
func (r *reconciler) returnSingleton(ctx context.Context, key objectKey, obj *unstructured.Unstructured,
	copies []placedCopy, rows []row) ([]problem, error) {
	d := decideSingleton(obj, copies, rows)
	if d.setLabel {
		if err := r.patchExecutingCount(ctx, key, d.label); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("setting label %s: %w", edgev2alpha1.ExecutingCountLabel, err)
		}
	}
	switch {
	case d.apply != nil:
		err := r.applyStatus(ctx, key, obj, d.apply)
		if apierrors.IsNotFound(err) {
			return nil, nil // gone meanwhile, or a kind without a status subresource
		}
		if refused(err) {
			return []problem{{placements: placementsOf(copies[0].obj), reason: reasonStatusRejected,
				message: fmt.Sprintf("%s %s: the status reported by SyncTarget %s cannot be written: %v",
					key.gvr.GroupResource(), objectName(key), copies[0].syncTarget, err)}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("writing the singleton status: %w", err)
		}
	case d.remove:
		live, err := r.live(ctx, key)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the object to remove the singleton status: %w", err)
		}
		if !ownsStatus(live) {
			return nil, nil // never remove what others wrote
		}
		if err := r.removeStatus(ctx, key, live); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("removing the singleton status: %w", err)
		}
	}
	return nil, nil
}

// refused reports whether the server refused a write for what it holds:
// the same write would fail again, until its input changes.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// writeCombined writes one CombinedStatus per placement whose clauses name
// StatusCollectors for the object, and removes those no longer wanted. A
// CombinedStatus the server refuses is returned as a problem.
func (r *reconciler) writeCombined(ctx context.Context, key objectKey, obj *unstructured.Unstructured, copies []placedCopy, rows []row) ([]problem, error) {
	wanted := map[string][]string{} // placement -> collectors
	rowsOf := map[string][]row{}    // placement -> its destinations' rows
	// The copies of one object on every SyncTarget mostly carry the same
	// annotation: each text is decoded once.
	decoded := map[string]map[string][]string{}
	for i, cp := range copies {
		text := crossspace.Annotation(cp.obj, edgev2alpha1.StatusCollectorsAnnotation)
		byPlacement, ok := decoded[text]
		if !ok {
			byPlacement, _ = decodeStatusCollectors(text) // reconcilePlacement reports a bad one
			decoded[text] = byPlacement
		}
		for ep, names := range byPlacement {
			for _, n := range names {
				if !slices.Contains(wanted[ep], n) {
					wanted[ep] = append(wanted[ep], n)
				}
			}
		}
		for _, ep := range placementsOf(cp.obj) {
			rowsOf[ep] = append(rowsOf[ep], rows[i])
		}
	}
	existing := map[string]*edgev2alpha1.CombinedStatus{}
	for _, cs := range r.combinedIn(key.wds) {
		existing[cs.Namespace+"/"+cs.Name] = cs
	}
	keep := map[string]bool{}
	var failures []summaryFailure
	var problems []problem
	for _, ep := range slices.Sorted(maps.Keys(wanted)) {
		names := wanted[ep]
		sort.Strings(names)
		cs := &edgev2alpha1.CombinedStatus{
			ObjectMeta: metav1.ObjectMeta{Name: combinedName(ep, key), Namespace: combinedNamespace(key)},
			ObjectRef:  edgev2alpha1.ObjectReference{Group: key.gvr.Group, Resource: key.gvr.Resource, Namespace: key.namespace, Name: key.name},
			Placement:  ep,
		}
		results, failed, err := r.summaries(ctx, key, ep, names, obj.Object, rowsOf[ep])
		if err != nil {
			return nil, err
		}
		cs.Results, failures = results, append(failures, failed...)
		keep[cs.Name] = true
		var werr error
		switch current, ok := existing[cs.Namespace+"/"+cs.Name]; {
		case !ok:
			// AlreadyExists means the cache has not seen it yet (created
			// by the previous reconcile, with what was reported then):
			// the error retries, and the retry compares with it.
			werr = r.createCombined(ctx, cs)
		case !apiequality.Semantic.DeepEqual(current.Results, cs.Results) || current.ObjectRef != cs.ObjectRef:
			updated := current.DeepCopy()
			updated.Results, updated.ObjectRef, updated.Placement = cs.Results, cs.ObjectRef, cs.Placement
			werr = r.updateCombined(ctx, updated)
		}
		if refused(werr) {
			problems = append(problems, problem{placements: []string{ep}, reason: reasonCombinedStatusRejected,
				message: fmt.Sprintf("CombinedStatus %s/%s of %s %s cannot be written: %v", cs.Namespace, cs.Name, key.gvr.GroupResource(), objectName(key), werr)})
			continue
		}
		if werr != nil {
			return nil, werr
		}
	}
	r.setSummaryFailures(ctx, key, failures)
	return problems, r.pruneCombined(ctx, key, keep)
}

// pruneCombined deletes the object's CombinedStatuses not in keep.
func (r *reconciler) pruneCombined(ctx context.Context, key objectKey, keep map[string]bool) error {
	for _, cs := range r.combinedIn(key.wds) {
		ref := cs.ObjectRef
		if ref.Group != key.gvr.Group || ref.Resource != key.gvr.Resource || ref.Namespace != key.namespace || ref.Name != key.name || keep[cs.Name] {
			continue
		}
		err := r.deleteCombined(ctx, &edgev2alpha1.CombinedStatus{ObjectMeta: metav1.ObjectMeta{Name: cs.Name, Namespace: cs.Namespace}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// decodeProblems are the annotations of a copy that do not decode, for the
// placements the copy names.
func decodeProblems(cp placedCopy) []problem {
	var out []problem
	// what is made only for a problem: this runs at every copy's event.
	what := func() string {
		if cp.syncTarget == "" { // its SyncTarget not known (yet)
			return fmt.Sprintf("%s %s in mailbox %s", cp.gvr.GroupResource(), crossspace.Qualified(cp.obj), cp.mailbox)
		}
		return fmt.Sprintf("%s %s in the mailbox of SyncTarget %s", cp.gvr.GroupResource(), crossspace.Qualified(cp.obj), cp.syncTarget)
	}
	if _, err := associatedState(cp.obj); err != nil {
		out = append(out, problem{placements: placementsOf(cp.obj), reason: reasonInvalidAssociatedState,
			message: fmt.Sprintf("%s: annotation %s (written by the syncer) is not a JSON object: %v", what(), edgev2alpha1.AssociatedStateAnnotation, err)})
	}
	if _, err := statusCollectors(cp.obj); err != nil {
		out = append(out, problem{placements: placementsOf(cp.obj), reason: reasonInvalidStatusCollectors,
			message: fmt.Sprintf("%s: annotation %s is not a JSON map of placement to StatusCollector names: %v", what(), edgev2alpha1.StatusCollectorsAnnotation, err)})
	}
	return out
}

// reconcilePlacement sets the StatusReturned condition of an EdgePlacement:
// False with the first problem (by message) while an annotation of one of
// its copies does not decode or the server refuses what the summarizer
// writes back; True otherwise. Placements that ask for no reported state
// (no singleton, no StatusCollectors) get the condition only once a
// problem concerns them.
func (r *reconciler) reconcilePlacement(ctx context.Context, key string) error {
	wds, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return nil
	}
	ep, ok := r.placement(wds, name)
	if !ok || ep.DeletionTimestamp != nil {
		return nil
	}
	problems := append(r.copyProblemsOf(wds, name), r.writeProblemsOf(wds, name)...)
	if len(problems) == 0 && !asksForReportedState(ep) && meta.FindStatusCondition(ep.Status.Conditions, epstatus.StatusReturned) == nil {
		return nil
	}
	updated := ep.DeepCopy()
	if !epstatus.SetReport(updated, returnedCondition(problems)) {
		return nil
	}
	return r.updatePlacementStatus(spaces.WithSpace(ctx, wds), updated)
}

// asksForReportedState reports whether a placement wants the singleton
// status or names StatusCollectors.
func asksForReportedState(ep *edgev2alpha1.EdgePlacement) bool {
	if ep.Spec.WantSingletonReportedState {
		return true
	}
	for _, c := range ep.Spec.Downsync {
		if len(c.StatusCollectors) > 0 {
			return true
		}
	}
	return false
}

// returnedCondition is the StatusReturned condition for a placement's problems.
func returnedCondition(problems []problem) metav1.Condition {
	if len(problems) == 0 {
		return metav1.Condition{Type: epstatus.StatusReturned, Status: metav1.ConditionTrue, Reason: reasonReturned,
			Message: "what the destinations report is read and written back"}
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].message < problems[j].message })
	first := problems[0]
	msg := first.message
	if len(problems) > 1 {
		msg = fmt.Sprintf("%d problems, such as: %s", len(problems), first.message)
	}
	return metav1.Condition{Type: epstatus.StatusReturned, Status: metav1.ConditionFalse, Reason: first.reason, Message: msg}
}

// combinedName is <placement>.<resource>.<object name>.
func combinedName(placement string, key objectKey) string {
	return placement + "." + key.gvr.Resource + "." + key.name
}

// combinedNamespace is the object's namespace ("default" for cluster-scoped objects).
func combinedNamespace(key objectKey) string {
	if key.namespace == "" {
		return metav1.NamespaceDefault
	}
	return key.namespace
}

// validateCollector sets a StatusCollector's Ready condition: whether its
// expressions compile and fit their cost limits, and whether a limit
// stopped a summary.
func (r *reconciler) validateCollector(ctx context.Context, key string) error {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return nil
	}
	sc, ok := r.collector(space, name)
	if !ok {
		return nil
	}
	updated := sc.DeepCopy()
	if !meta.SetStatusCondition(&updated.Status.Conditions, r.collectorCondition(sc)) {
		return nil
	}
	return r.updateCollectorStatus(spaces.WithSpace(ctx, space), updated)
}

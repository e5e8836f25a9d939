// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package upsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
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

// Reasons of the Upsynced condition of an EdgePlacement.
const (
	reasonUpsynced = "Upsynced"
	// reasonUpsyncRefused: the API server refused to write an upsynced
	// object (or its namespace) into the WDS.
	reasonUpsyncRefused = "UpsyncRefused"
)

// target is a placement that targets a SyncTarget and has upsync clauses.
type target struct {
	wds       string
	placement string
	clauses   []edgev2alpha1.UpsyncClause
}

// problem is an upsynced object the server refused to write into a WDS,
// for the placements whose clauses select it.
type problem struct {
	wds        string
	placements []string
	message    string
}

// reconciler is the logic of the controller; its dependencies are function
// fields so that tests can stub them.
type reconciler struct {
	// syncTarget returns a SyncTarget of an inventory space.
	syncTarget func(inv, name string) (*edgev2alpha1.SyncTarget, bool)
	// targetsOf returns the placements that have a SyncTarget among their
	// destinations and upsync clauses.
	targetsOf func(inv, syncTarget string) []target
	// knownResources returns the resources whose upsynced objects are cached.
	knownResources func() []schema.GroupVersionResource
	// resourceOf maps an upsync clause's group and resource to a resource
	// the server serves.
	resourceOf func(mailbox, group, resource string) (schema.GroupVersionResource, bool)
	// synced reports whether the cache of upsynced objects of a resource
	// is ready (starting it on first use).
	synced func(gvr schema.GroupVersionResource, spaces ...string) bool
	// inMailbox returns the cached upsynced objects of a mailbox.
	inMailbox func(gvr schema.GroupVersionResource, mailbox string) []*unstructured.Unstructured
	// copiedFrom returns the cached WDS objects upsynced from a SyncTarget
	// ("inv/name").
	copiedFrom func(gvr schema.GroupVersionResource, from string) []*unstructured.Unstructured
	// current returns a cached WDS object (nil when absent).
	current func(gvr schema.GroupVersionResource, wds, namespace, name string) *unstructured.Unstructured
	// ensureNamespace creates a namespace of a WDS (ctx names the space) if missing.
	ensureNamespace func(ctx context.Context, namespace string) error
	// apply server-side applies an upsynced object as FieldManager.
	apply func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error
	// delete deletes an upsynced object of a WDS.
	delete func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) error
	// setProblems remembers the problems of a SyncTarget's latest complete
	// reconcile and the placements that target it.
	setProblems func(syncTarget string, targets []target, problems []problem)

	// placement returns an EdgePlacement of a WDS.
	placement func(wds, name string) (*edgev2alpha1.EdgePlacement, bool)
	// destinationsOf returns a placement's destinations as SyncTarget keys.
	destinationsOf func(wds, name string) []string
	// problemsOf returns the problems remembered for a SyncTarget, and
	// whether it was reconciled since the controller started.
	problemsOf func(syncTarget string) ([]problem, bool)
	// updatePlacementStatus writes an EdgePlacement's status.
	updatePlacementStatus func(ctx context.Context, ep *edgev2alpha1.EdgePlacement) error
}

// reconcile makes the WDSes hold exactly the selected upsynced objects of
// one SyncTarget's mailbox. An object the server refuses to write is a
// problem for its placements (and a retry with backoff), and does not stop
// the others.
func (r *reconciler) reconcile(ctx context.Context, key string) (bool, error) {
	invSpace, _, stName, err := spaces.SplitKey(key)
	if err != nil {
		return false, nil
	}
	from := invSpace + "/" + stName
	st, ok := r.syncTarget(invSpace, stName)
	mailbox := ""
	// The mailbox is derived from the SyncTarget's UID, never taken from a
	// status a syncer could have written.
	if ok && st.DeletionTimestamp == nil && st.Status.MailboxSpace == spaces.MailboxName(invSpace, string(st.UID)) {
		mailbox = st.Status.MailboxSpace
	}
	var targets []target
	if mailbox != "" {
		targets = r.targetsOf(invSpace, stName)
	}
	var problems []problem
	for _, gvr := range r.resources(mailbox, targets) {
		if !r.synced(gvr, append([]string{mailbox}, wdsesOf(targets)...)...) {
			return true, nil
		}
		desired := desiredCopies(gvr, r.mailboxObjects(gvr, mailbox), targets, invSpace, stName)
		for _, k := range slices.Sorted(maps.Keys(desired)) {
			d := desired[k]
			wctx := spaces.WithSpace(ctx, d.wds)
			current := r.current(gvr, d.wds, d.obj.GetNamespace(), d.obj.GetName())
			if current != nil && sameContent(current, d.obj) {
				continue
			}
			err := r.write(wctx, gvr, d.obj)
			if refused(err) {
				problems = append(problems, problem{wds: d.wds, placements: d.placements, message: fmt.Sprintf(
					"%s %s upsynced from SyncTarget %s cannot be written into %s as %s: %v",
					gvr.GroupResource(), crossspace.Qualified(d.source), from, d.wds, crossspace.Qualified(d.obj), err)})
				continue
			}
			if err != nil {
				return false, err
			}
		}
		for _, u := range r.copiedFrom(gvr, from) {
			if _, want := desired[spaces.Key(spaceOf(u), u.GetNamespace(), u.GetName())]; want {
				continue
			}
			err := r.delete(spaces.WithSpace(ctx, spaceOf(u)), gvr, u.GetNamespace(), u.GetName())
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
	}
	r.setProblems(key, targets, problems)
	return len(problems) > 0, nil
}

// wdsesOf returns the WDSs of targets.
func wdsesOf(targets []target) []string {
	out := make([]string, 0, len(targets))
	for _, t := range targets {
		out = append(out, t.wds)
	}
	return out
}

// resources are those of the targets' upsync clauses, and those already
// upsynced anywhere (to remove what is no longer selected), sorted.
func (r *reconciler) resources(mailbox string, targets []target) []schema.GroupVersionResource {
	gvrs := map[schema.GroupVersionResource]bool{}
	for _, gvr := range r.knownResources() {
		gvrs[gvr] = true
	}
	for _, t := range targets {
		for _, cl := range t.clauses {
			for _, res := range cl.Resources {
				if res == "*" || cl.APIGroup == "*" {
					continue // wildcards upsync only resources already in use
				}
				if gvr, ok := r.resourceOf(mailbox, cl.APIGroup, res); ok {
					gvrs[gvr] = true
				}
			}
		}
	}
	out := make([]schema.GroupVersionResource, 0, len(gvrs))
	for gvr := range gvrs {
		out = append(out, gvr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (r *reconciler) mailboxObjects(gvr schema.GroupVersionResource, mailbox string) []*unstructured.Unstructured {
	if mailbox == "" {
		return nil
	}
	return r.inMailbox(gvr, mailbox)
}

// write creates an upsynced object's namespace if missing, then applies it.
func (r *reconciler) write(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	if ns := obj.GetNamespace(); ns != "" {
		if err := r.ensureNamespace(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return r.apply(ctx, gvr, obj)
}

// refused reports whether the server refused a write for what it is or
// where it goes (not a conflict or an outage): retrying at once would
// fail the same way.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsMethodNotSupported(err)
}

// desiredCopy is an upsynced object as it should be in one WDS.
type desiredCopy struct {
	wds        string
	source     *unstructured.Unstructured
	obj        *unstructured.Unstructured
	placements []string
}

// desiredCopies are the WDS copies of what a syncer upsynced into its
// mailbox that the targets' clauses select, keyed by spaces.Key of the copy.
func desiredCopies(gvr schema.GroupVersionResource, mailboxObjects []*unstructured.Unstructured, targets []target, invSpace, stName string) map[string]*desiredCopy {
	desired := map[string]*desiredCopy{}
	for _, obj := range mailboxObjects {
		// Only what the syncer upsynced, never the server's copies.
		if obj.GetLabels()[UpsyncedLabel] != "true" || obj.GetLabels()[edgev2alpha1.PlacementCopyLabel] == "true" {
			continue
		}
		for _, t := range targets {
			for _, cl := range t.clauses {
				if !matches(cl, gvr.Group, gvr.Resource, obj.GetNamespace(), obj.GetName()) {
					continue
				}
				cp := wdsCopy(obj, invSpace, stName)
				k := spaces.Key(t.wds, cp.GetNamespace(), cp.GetName())
				d, ok := desired[k]
				if !ok {
					d = &desiredCopy{wds: t.wds, source: obj, obj: cp}
					desired[k] = d
				}
				if !slices.Contains(d.placements, t.placement) {
					d.placements = append(d.placements, t.placement)
				}
			}
		}
	}
	return desired
}

// reconcilePlacement sets the Upsynced condition of an EdgePlacement with
// upsync clauses: False with the first problem (by message) while the
// server refuses an object its clauses select, True otherwise. It waits
// (requeue) until every destination has been reconciled since the
// controller started, so that a restart never clears a problem that is
// still there.
func (r *reconciler) reconcilePlacement(ctx context.Context, key string) (bool, error) {
	wds, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return false, nil
	}
	ep, ok := r.placement(wds, name)
	if !ok || ep.DeletionTimestamp != nil {
		return false, nil
	}
	if len(ep.Spec.Upsync) == 0 && meta.FindStatusCondition(ep.Status.Conditions, epstatus.Upsynced) == nil {
		return false, nil
	}
	var problems []problem
	for _, st := range r.destinationsOf(wds, name) {
		found, reconciled := r.problemsOf(st)
		if !reconciled {
			inv, _, stName, _ := spaces.SplitKey(st)
			if _, exists := r.syncTarget(inv, stName); exists {
				return true, nil
			}
		}
		for _, p := range found {
			if p.wds == wds && slices.Contains(p.placements, name) {
				problems = append(problems, p)
			}
		}
	}
	updated := ep.DeepCopy()
	if !epstatus.SetReport(updated, upsyncedCondition(problems)) {
		return false, nil
	}
	return false, r.updatePlacementStatus(spaces.WithSpace(ctx, wds), updated)
}

// upsyncedCondition is the Upsynced condition for a placement's problems.
func upsyncedCondition(problems []problem) metav1.Condition {
	if len(problems) == 0 {
		return metav1.Condition{Type: epstatus.Upsynced, Status: metav1.ConditionTrue, Reason: reasonUpsynced,
			Message: "every selected edge object is in the workload description space"}
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].message < problems[j].message })
	msg := problems[0].message
	if len(problems) > 1 {
		msg = fmt.Sprintf("%d objects not upsynced, such as: %s", len(problems), msg)
	}
	return metav1.Condition{Type: epstatus.Upsynced, Status: metav1.ConditionFalse, Reason: reasonUpsyncRefused, Message: msg}
}

// sameContent compares what upsync writes: everything but server-set metadata.
func sameContent(current, cp *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		out := wdsCopy(u, "", "").Object
		meta, _ := out["metadata"].(map[string]any)
		delete(meta, "name")
		if a, ok := meta["annotations"].(map[string]any); ok {
			delete(a, edgev2alpha1.UpsyncedFromAnnotation)
			delete(a, OriginalNameAnnotation)
		}
		return out
	}
	a, b := strip(current), strip(cp)
	return equalJSON(a, b) && current.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation] == cp.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation]
}

func spaceOf(obj metav1.Object) string { return obj.GetAnnotations()[spaces.Annotation] }

// fromOf splits an upsynced-from annotation ("inv/name") into the
// SyncTarget's key.
func fromOf(from string) (string, bool) {
	inv, st, ok := strings.Cut(from, "/")
	if !ok {
		return "", false
	}
	return spaces.Key(inv, "", st), true
}

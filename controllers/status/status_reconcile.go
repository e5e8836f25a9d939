package status

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// reconcile returns what the copies of one WDS object report.
func (c *Controller) reconcile(ctx context.Context, key objectKey) (requeue bool, err error) {
	inf := c.informerFor(key.gvr)
	if !inf.HasSynced() {
		return true, nil
	}
	wctx := spaces.WithSpace(ctx, key.wds)
	obj, exists := crossspace.Get[*unstructured.Unstructured](inf, key.wds, key.namespace, key.name)
	if !exists {
		c.setSummaryFailures(ctx, key, nil)
		return false, c.pruneCombined(wctx, key, nil)
	}
	raw, _ := inf.ByIndex(bySource, sourceKey(key.wds, key.namespace, key.name))
	mailboxes := map[string]string{} // mailbox -> SyncTarget name
	type located struct {
		space string
		obj   *unstructured.Unstructured
	}
	var found []located
	for _, r := range raw {
		u := r.(*unstructured.Unstructured)
		space := crossspace.SpaceOf(u)
		if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, space); ok {
			mailboxes[space] = st.Name
			found = append(found, located{space, u})
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].space < found[j].space })
	copies := make([]*unstructured.Unstructured, len(found))
	spacesOf := make([]string, len(found))
	for i, f := range found {
		copies[i], spacesOf[i] = f.obj, f.space
	}

	rows := make([]row, 0, len(copies))
	singleton, reported := false, 0
	for i, cp := range copies {
		r := row{Inventory: mailboxes[spacesOf[i]]}
		if s, ok := cp.Object["status"].(map[string]any); ok && len(s) > 0 {
			r.Status = s
			reported++
		}
		if a := cp.GetAnnotations()[edgev2alpha1.AssociatedStateAnnotation]; a != "" {
			_ = json.Unmarshal([]byte(a), &r.Associated)
		}
		rows = append(rows, r)
		singleton = singleton || cp.GetAnnotations()[edgev2alpha1.WantSingletonAnnotation] == "true"
	}

	if err := c.returnSingleton(wctx, key, obj, copies, rows, singleton, reported); err != nil {
		return false, err
	}
	return false, c.writeCombined(wctx, key, obj, copies, rows)
}

// returnSingleton maintains the executing-count label, and copies the one
// destination's status when the object has exactly one.
func (c *Controller) returnSingleton(ctx context.Context, key objectKey, obj *unstructured.Unstructured,
	copies []*unstructured.Unstructured, rows []row, singleton bool, reported int) error {
	want := ""
	if singleton {
		want = strconv.Itoa(reported)
	}
	if obj.GetLabels()[edgev2alpha1.ExecutingCountLabel] != want {
		var value any = want
		if want == "" {
			value = nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{edgev2alpha1.ExecutingCountLabel: value}}})
		_, err := c.clients.Dynamic.Resource(key.gvr).Namespace(key.namespace).Patch(ctx, key.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubestellar-status"})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if !singleton || len(copies) != 1 || rows[0].Status == nil {
		// With zero or several destinations, .status is not overwritten.
		return nil
	}
	current, _ := obj.Object["status"].(map[string]any)
	if apiequality.Semantic.DeepEqual(current, rows[0].Status) {
		return nil
	}
	updated := obj.DeepCopy()
	updated.Object["status"] = rows[0].Status
	_, err := c.clients.Dynamic.Resource(key.gvr).Namespace(key.namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: "kubestellar-status"})
	if apierrors.IsNotFound(err) {
		return nil // gone meanwhile, or a kind without a status subresource
	}
	return err
}

// writeCombined writes one CombinedStatus per placement whose clauses name
// StatusCollectors for the object, and removes those no longer wanted.
func (c *Controller) writeCombined(ctx context.Context, key objectKey, obj *unstructured.Unstructured, copies []*unstructured.Unstructured, rows []row) error {
	wanted := map[string][]string{} // placement -> collectors
	rowsOf := map[string][]row{}    // placement -> its destinations' rows
	for i, cp := range copies {
		var byPlacement map[string][]string
		if a := cp.GetAnnotations()[edgev2alpha1.StatusCollectorsAnnotation]; a != "" {
			_ = json.Unmarshal([]byte(a), &byPlacement)
		}
		for ep, names := range byPlacement {
			for _, n := range names {
				if !contains(wanted[ep], n) {
					wanted[ep] = append(wanted[ep], n)
				}
			}
		}
		for _, ep := range strings.Split(cp.GetAnnotations()[edgev2alpha1.PlacementsAnnotation], ",") {
			if ep != "" {
				rowsOf[ep] = append(rowsOf[ep], rows[i])
			}
		}
	}
	keep := map[string]bool{}
	var failures []summaryFailure
	for ep, names := range wanted {
		sort.Strings(names)
		cs := &edgev2alpha1.CombinedStatus{
			ObjectMeta: metav1.ObjectMeta{Name: combinedName(ep, key), Namespace: combinedNamespace(key)},
			ObjectRef:  edgev2alpha1.ObjectReference{Group: key.gvr.Group, Resource: key.gvr.Resource, Namespace: key.namespace, Name: key.name},
			Placement:  ep,
		}
		results, failed, err := c.summaries(ctx, key, ep, names, obj.Object, rowsOf[ep])
		if err != nil {
			return err
		}
		cs.Results, failures = results, append(failures, failed...)
		keep[cs.Name] = true
		existing, ok := crossspace.Get[*edgev2alpha1.CombinedStatus](c.combined, key.wds, cs.Namespace, cs.Name)
		switch {
		case !ok:
			if err := c.clients.Client.Create(ctx, cs); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case !apiequality.Semantic.DeepEqual(existing.Results, cs.Results) || existing.ObjectRef != cs.ObjectRef:
			updated := existing.DeepCopy()
			updated.Results, updated.ObjectRef, updated.Placement = cs.Results, cs.ObjectRef, cs.Placement
			if err := c.clients.Client.Update(ctx, updated); err != nil {
				return err
			}
		}
	}
	c.setSummaryFailures(ctx, key, failures)
	return c.pruneCombined(ctx, key, keep)
}

// pruneCombined deletes the object's CombinedStatuses not in keep.
func (c *Controller) pruneCombined(ctx context.Context, key objectKey, keep map[string]bool) error {
	for _, cs := range crossspace.InSpace[*edgev2alpha1.CombinedStatus](c.combined, key.wds) {
		ref := cs.ObjectRef
		if ref.Group != key.gvr.Group || ref.Resource != key.gvr.Resource || ref.Namespace != key.namespace || ref.Name != key.name || keep[cs.Name] {
			continue
		}
		err := c.clients.Client.Delete(ctx, &edgev2alpha1.CombinedStatus{ObjectMeta: metav1.ObjectMeta{Name: cs.Name, Namespace: cs.Namespace}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
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

// validateCollector reports whether a StatusCollector's expressions compile
// and fit their cost limits.
func (c *Controller) validateCollector(ctx context.Context, key string) error {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return nil
	}
	sc, ok := crossspace.Get[*edgev2alpha1.StatusCollector](c.collectors, space, "", name)
	if !ok {
		return nil
	}
	cond := c.collectorCondition(sc)
	updated := sc.DeepCopy()
	if !meta.SetStatusCondition(&updated.Status.Conditions, cond) {
		return nil
	}
	return c.clients.Client.Status().Update(spaces.WithSpace(ctx, space), updated)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

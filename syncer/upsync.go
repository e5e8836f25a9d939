package syncer

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// upsyncSelects reports whether an upsync clause selects an edge object.
func upsyncSelects(c edgev2alpha1.UpsyncClause, gvr schema.GroupVersionResource, namespace, name string) bool {
	return c.Selects(gvr.Group, gvr.Resource, namespace, name)
}

// reconcileUpsync makes the mailbox's upsynced objects of one resource the
// edge objects the upsync clauses select: never objects the syncer put
// there itself, which are downsynced.
func (s *Syncer) reconcileUpsync(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	s.mu.Lock()
	edge, have := s.edgeObjs[gvr], s.upsynced[gvr]
	var clauses []edgev2alpha1.UpsyncClause
	if s.config != nil {
		clauses = s.config.Spec.Upsync
	}
	owner := s.owner
	s.mu.Unlock()
	if edge == nil || have == nil {
		return false, nil
	}
	if !edge.informer.HasSynced() || !have.informer.HasSynced() {
		return true, nil
	}
	want := map[string]*unstructured.Unstructured{}
	for _, item := range edge.store().List() {
		u := item.(*unstructured.Unstructured)
		if ownedBy(u, owner) || u.GetDeletionTimestamp() != nil {
			continue
		}
		if slices.ContainsFunc(clauses, func(c edgev2alpha1.UpsyncClause) bool {
			return upsyncSelects(c, gvr, u.GetNamespace(), u.GetName())
		}) {
			want[u.GetNamespace()+"/"+u.GetName()] = u
		}
	}
	rc := func(ns string) interface {
		Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		Update(context.Context, *unstructured.Unstructured, metav1.UpdateOptions, ...string) (*unstructured.Unstructured, error)
		Delete(context.Context, string, metav1.DeleteOptions, ...string) error
	} {
		if ns == "" {
			return s.mailbox.Resource(gvr)
		}
		return s.mailbox.Resource(gvr).Namespace(ns)
	}
	for k, u := range want {
		cur := have.get(u.GetNamespace(), u.GetName())
		obj := upsyncObject(u)
		if cur == nil {
			if err := s.ensureMailboxNamespace(ctx, u.GetNamespace()); err != nil {
				return false, err
			}
			if _, err := rc(u.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, s.centerErr(fmt.Errorf("upsyncing %s %s: %w", gvr.Resource, k, err))
			}
			continue
		}
		if sameUpsync(u, cur) {
			continue
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		if _, err := rc(u.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return false, s.centerErr(fmt.Errorf("upsyncing %s %s: %w", gvr.Resource, k, err))
		}
	}
	for _, item := range have.store().List() {
		u := item.(*unstructured.Unstructured)
		if _, ok := want[u.GetNamespace()+"/"+u.GetName()]; ok {
			continue
		}
		err := rc(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, s.centerErr(fmt.Errorf("removing upsynced %s %s/%s: %w", gvr.Resource, u.GetNamespace(), u.GetName(), err))
		}
	}
	return false, nil
}

// ensureMailboxNamespace creates a namespace for upsynced objects in the
// mailbox when it is missing.
func (s *Syncer) ensureMailboxNamespace(ctx context.Context, ns string) error {
	if ns == "" {
		return nil
	}
	nsObj := &unstructured.Unstructured{}
	nsObj.SetAPIVersion("v1")
	nsObj.SetKind("Namespace")
	nsObj.SetName(ns)
	nsObj.SetLabels(map[string]string{UpsyncedLabel: "true"})
	_, err := s.mailbox.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Create(ctx, nsObj, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return s.centerErr(fmt.Errorf("creating namespace %s in the mailbox: %w", ns, err))
	}
	return nil
}

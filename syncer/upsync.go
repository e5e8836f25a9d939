// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
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
	// Removals first: they make room in a mailbox at its quota (the
	// server's --mailbox-object-limit). One object the center refuses does
	// not hold up the others; an unreachable center stops the pass.
	var failed upsyncErrors
	refused := false // a create was refused: the others would be too
	for _, item := range have.store().List() {
		u := item.(*unstructured.Unstructured)
		if _, ok := want[u.GetNamespace()+"/"+u.GetName()]; ok {
			continue
		}
		err := rc(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			if failed.add(s.centerErr(fmt.Errorf("removing upsynced %s %s/%s: %w", gvr.Resource, u.GetNamespace(), u.GetName(), err))) {
				return false, failed.err()
			}
		}
	}
	for k, u := range want {
		cur := have.get(u.GetNamespace(), u.GetName())
		obj := upsyncObject(u)
		if cur == nil {
			if refused {
				failed.more++
				continue
			}
			if err := s.ensureMailboxNamespace(ctx, u.GetNamespace()); err != nil {
				refused = apierrors.IsForbidden(err)
				if failed.add(err) {
					return false, failed.err()
				}
				continue
			}
			if _, err := rc(u.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
				refused = apierrors.IsForbidden(err)
				if failed.add(s.centerErr(fmt.Errorf("upsyncing %s %s: %w", gvr.Resource, k, err))) {
					return false, failed.err()
				}
			}
			continue
		}
		if sameUpsync(u, cur) {
			continue
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		if _, err := rc(u.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			if failed.add(s.centerErr(fmt.Errorf("upsyncing %s %s: %w", gvr.Resource, k, err))) {
				return false, failed.err()
			}
		}
	}
	return false, failed.err()
}

// upsyncErrors keeps the first error of an upsync pass and counts the rest.
type upsyncErrors struct {
	first error
	more  int
}

// add records err and tells whether the pass should stop: the center is
// unreachable, so every other request would fail the same way.
func (e *upsyncErrors) add(err error) bool {
	if e.first == nil {
		e.first = err
	} else {
		e.more++
	}
	return errors.Is(err, errOffline)
}

func (e *upsyncErrors) err() error {
	if e.first == nil || e.more == 0 {
		return e.first
	}
	return fmt.Errorf("%w (and %d more objects failed)", e.first, e.more)
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
	namespaces := s.mailbox.Resource(corev1.SchemeGroupVersion.WithResource("namespaces"))
	_, err := namespaces.Create(ctx, nsObj, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsForbidden(err) {
		// Admission comes before the check for an existing object: a
		// mailbox at its quota of namespaces refuses even one it has.
		if _, getErr := namespaces.Get(ctx, ns, metav1.GetOptions{}); getErr == nil {
			return nil
		}
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return s.centerErr(fmt.Errorf("creating namespace %s in the mailbox: %w", ns, err))
	}
	return nil
}

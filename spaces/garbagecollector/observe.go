// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package garbagecollector

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestellar/kubestellar/spaces"
)

// Observe wraps the storage of one resource so that the collector learns
// of every write it commits: a create or update that gives an object
// owners, an update that marks one for deletion with the collector's
// finalizers, a delete. Wrap the storage outside the space partitioning
// (spaces.Decorate), so that the space is the request context's.
func (c *Collector) Observe(gr schema.GroupResource, s storage.Interface) storage.Interface {
	return &observed{Interface: s, gr: gr, c: c}
}

type observed struct {
	storage.Interface
	gr schema.GroupResource
	c  *Collector
}

func (o *observed) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := o.Interface.Create(ctx, key, obj, out, ttl); err != nil {
		return err
	}
	space := spaces.SpaceOrRoot(ctx)
	if a, err := meta.Accessor(out); err == nil && collects(space) && len(a.GetOwnerReferences()) > 0 {
		// Its owners are read from the datastore, after a delete of one
		// of them has had its lookup of dependents (lookAfter).
		o.c.queue.AddAfter(item{op: opCheck, space: space, group: o.gr.Group, resource: o.gr.Resource, namespace: a.GetNamespace(), name: a.GetName()}, 2*lookAfter)
	}
	return nil
}

func (o *observed) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	if err := o.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts); err != nil {
		return err
	}
	space := spaces.SpaceOrRoot(ctx)
	a, err := meta.Accessor(out)
	if err != nil || !collects(space) {
		return nil
	}
	o.c.ownerGone(space, a.GetNamespace(), a.GetUID())
	// An owner deleting in the foreground may be waiting for this one.
	o.c.ownersChanged(space, a.GetNamespace(), a.GetOwnerReferences())
	return nil
}

func (o *observed) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	var before []metav1.OwnerReference
	observe := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		// The last call is the one committed.
		before = nil
		if a, err := meta.Accessor(input); err == nil {
			before = slices.Clone(a.GetOwnerReferences())
		}
		return tryUpdate(input, res)
	}
	if err := o.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, observe, cachedExistingObject); err != nil {
		return err
	}
	a, err := meta.Accessor(destination)
	if err != nil {
		return nil
	}
	space := spaces.SpaceOrRoot(ctx)
	if a.GetDeletionTimestamp() != nil && hasCollectorFinalizer(a.GetFinalizers()) {
		o.c.enqueue(item{op: opFinalize, space: space, group: o.gr.Group, resource: o.gr.Resource, namespace: a.GetNamespace(), name: a.GetName()})
	}
	if !collects(space) {
		return nil
	}
	after := a.GetOwnerReferences()
	if slices.ContainsFunc(after, func(r metav1.OwnerReference) bool { return !hasOwner(before, r.UID) }) {
		o.c.enqueue(item{op: opCheck, space: space, group: o.gr.Group, resource: o.gr.Resource, namespace: a.GetNamespace(), name: a.GetName()})
	}
	var dropped []metav1.OwnerReference
	for _, r := range before {
		if !hasOwner(after, r.UID) {
			dropped = append(dropped, r)
		}
	}
	o.c.ownersChanged(space, a.GetNamespace(), dropped)
	return nil
}

// collects tells whether the collector looks for owners and dependents in
// a space: not in mailboxes, whose copies carry neither (the placement
// translator strips them) and are deleted by the translator.
func collects(space string) bool {
	return space != spaces.Wildcard && !spaces.IsMailboxName(space)
}

func hasOwner(refs []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

func hasCollectorFinalizer(finalizers []string) bool {
	return slices.Contains(finalizers, metav1.FinalizerOrphanDependents) || slices.Contains(finalizers, metav1.FinalizerDeleteDependents)
}

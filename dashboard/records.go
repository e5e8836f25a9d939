// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/spaces"
)

// recordStore is the store of a reflector of one kind the dashboard shows
// (SyncTargets, EdgePlacements, SinglePlacementSlices, Spaces,
// SyncerConfigs). It keeps no object, only the dashboard's records of
// them (set, del) and the space, namespace and name of each, for a relist
// to tell which were deleted meanwhile. An informer's cache held every
// object whole beside its record: with a fleet, a few KB per SyncTarget,
// Space and SyncerConfig that nothing read again.
type recordStore struct {
	ctx context.Context
	s   *Store
	set setFunc
	del delFunc

	mu    sync.Mutex
	known map[recordKey]bool
	rv    string // the last resource version seen
	// listed is set once a first list has been recorded.
	listed atomic.Bool
}

// recordKey names an object the dashboard has a record of.
type recordKey struct{ space, namespace, name string }

var _ cache.Store = &recordStore{}

func newRecordStore(ctx context.Context, s *Store, set setFunc, del delFunc) *recordStore {
	return &recordStore{ctx: ctx, s: s, set: set, del: del, known: map[recordKey]bool{}}
}

func keyOf(u *unstructured.Unstructured) recordKey {
	space := annotation(u, spaces.Annotation)
	if space == "" {
		space = spaces.Root
	}
	return recordKey{space, u.GetNamespace(), u.GetName()}
}

func unstructuredOf(obj any) (*unstructured.Unstructured, error) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("dashboard: unexpected %T", obj)
	}
	return u, nil
}

// Add records an object that was added or changed.
func (r *recordStore) Add(obj any) error {
	u, err := unstructuredOf(obj)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.known[keyOf(u)] = true
	r.rv = u.GetResourceVersion()
	r.mu.Unlock()
	r.s.apply(r.ctx, u, false, r.set, r.del)
	return nil
}

// Update is Add.
func (r *recordStore) Update(obj any) error { return r.Add(obj) }

// Delete forgets an object.
func (r *recordStore) Delete(obj any) error {
	u, err := unstructuredOf(obj)
	if err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.known, keyOf(u))
	r.rv = u.GetResourceVersion()
	r.mu.Unlock()
	r.s.apply(r.ctx, u, true, r.set, r.del)
	return nil
}

// Replace records the objects of a full list and forgets those it lacks:
// they were deleted while the watch was down.
func (r *recordStore) Replace(list []any, rv string) error {
	listed := make(map[recordKey]*unstructured.Unstructured, len(list))
	for _, obj := range list {
		u, err := unstructuredOf(obj)
		if err != nil {
			return err
		}
		listed[keyOf(u)] = u
	}
	r.mu.Lock()
	var gone []recordKey
	for k := range r.known {
		if listed[k] == nil {
			gone = append(gone, k)
		}
	}
	r.known = make(map[recordKey]bool, len(listed))
	for k := range listed {
		r.known[k] = true
	}
	r.rv = rv
	r.mu.Unlock()
	for _, u := range listed {
		r.s.apply(r.ctx, u, false, r.set, r.del)
	}
	for _, k := range gone {
		// What a record's deletion reads: its space, namespace and name.
		stub := &unstructured.Unstructured{}
		stub.SetName(k.name)
		stub.SetNamespace(k.namespace)
		stub.SetAnnotations(map[string]string{spaces.Annotation: k.space})
		r.s.apply(r.ctx, stub, true, r.set, r.del)
	}
	r.listed.Store(true)
	klog.FromContext(r.ctx).V(4).Info("dashboard listed", "objects", len(list), "gone", len(gone))
	return nil
}

// Bookmark notes the resource version of a bookmark.
func (r *recordStore) Bookmark(rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rv = rv
}

// LastStoreSyncResourceVersion is the last resource version seen.
func (r *recordStore) LastStoreSyncResourceVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rv
}

// HasSynced reports whether a first list has been recorded.
func (r *recordStore) HasSynced() bool { return r.listed.Load() }

// The reflector reads no object back from its store.

func (r *recordStore) List() []any                                { return nil }
func (r *recordStore) ListKeys() []string                         { return nil }
func (r *recordStore) Get(any) (item any, exists bool, err error) { return nil, false, nil }
func (r *recordStore) GetByKey(string) (any, bool, error)         { return nil, false, nil }
func (r *recordStore) Resync() error                              { return nil }

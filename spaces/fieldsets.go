// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// fieldSets shares the field sets of managedFields (an entry's fieldsV1)
// between the objects a watch cache holds. Each entry of an object's
// managedFields names, for one field manager, every field it owns; objects
// of a kind written by the same controllers own the same fields, and a
// fleet's SyncTargets, Locations, Spaces and mailbox Namespaces, tens of
// thousands of them, hold a few distinct sets between them. Decoded, a
// custom resource's set is a tree of maps (SetObjectMeta in
// apiextensions' decoding makes it one): two thirds of a cached Space's
// memory, 8.5 KB with its three entries against 2.9 KB without. An
// object takes the set an object cached before it has, when equal.
//
// What is shared is never written to: the watch cache's objects are read
// only (the API server copies before it changes one), and the sets are
// read by decoding them. The table is bounded: it keeps up to
// fieldSetsKept sets in each of two generations, a set not seen for a
// generation is forgotten (objects keep theirs), and a set larger than
// fieldSetMax as JSON is never kept: a tenant's objects with large,
// distinct sets (a ConfigMap's thousand data keys) would otherwise keep
// megabytes each alive in the table after the objects are gone.
type fieldSets struct {
	mu        sync.Mutex
	cur, prev map[string]any
}

const (
	// fieldSetsKept bounds each generation of the table.
	fieldSetsKept = 2048
	// fieldSetMax bounds a set the table keeps, as JSON: the sets of the
	// fleet's objects are a few hundred bytes.
	fieldSetMax = 1 << 10
)

// share makes obj's field sets those of the table where equal, and adds
// those it does not have. obj must be the caller's alone: it is changed.
func (f *fieldSets) share(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		md, _ := u.Object["metadata"].(map[string]any)
		entries, _ := md["managedFields"].([]any)
		for _, e := range entries {
			entry, ok := e.(map[string]any)
			if !ok {
				continue
			}
			set, ok := entry["fieldsV1"].(map[string]any)
			if !ok {
				continue
			}
			key, err := json.Marshal(set) // map keys in order: equal sets, equal keys
			if err != nil || len(key) > fieldSetMax {
				continue
			}
			entry["fieldsV1"] = f.canonical("u"+string(key), set)
		}
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	entries := m.GetManagedFields() // a typed object's own slice
	for i := range entries {
		if set := entries[i].FieldsV1; set != nil && len(set.GetRawBytes()) <= fieldSetMax {
			entries[i].FieldsV1 = f.canonical("t"+set.GetRawString(), set).(*metav1.FieldsV1)
		}
	}
}

// canonical returns the set the table has under key, or adds set.
func (f *fieldSets) canonical(key string, set any) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.cur[key]; ok {
		return c
	}
	if c, ok := f.prev[key]; ok {
		f.add(key, c)
		return c
	}
	f.add(key, set)
	return set
}

func (f *fieldSets) add(key string, set any) {
	if f.cur == nil || len(f.cur) >= fieldSetsKept {
		f.prev, f.cur = f.cur, make(map[string]any, fieldSetsKept)
	}
	f.cur[key] = set
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"runtime"
	"strconv"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// copyMemo remembers, for each WDS object the translator has copied, the
// copy it made (stripped, and annotated with its source space) and the
// content hashes of the mailbox copies made from it, so that each version of an
// object is stripped once and not once per mailbox, and a mailbox whose
// copy is unchanged is known to be so without making the copy again. At
// 3,000 mailboxes every reconcile of every mailbox stripped, copied and
// JSON-hashed all of its objects to find the one that changed.
//
// Only copies that are the same for every destination are remembered: an
// object with no Customizer and no parameters to expand. An entry is keyed
// by the cached WDS object itself, weakly: a cache replaces an object that
// changes, never edits it, so an entry lives exactly as long as the cache
// holds that version of the object, and what the memo holds is bounded by
// what the caches hold, without a size to tune. The resource version is
// checked too, against a caller that edits in place.
type copyMemo struct {
	mu      sync.Mutex
	entries map[weak.Pointer[unstructured.Unstructured]]*memoEntry
}

func newCopyMemo() *copyMemo {
	return &copyMemo{entries: map[weak.Pointer[unstructured.Unstructured]]*memoEntry{}}
}

// memoEntry is what is remembered of one version of a WDS object.
type memoEntry struct {
	resourceVersion string
	// copy is shared by every mailbox's desired copy: read-only.
	copy *unstructured.Unstructured

	mu sync.Mutex
	// hashes are the content hashes of the mailbox copies made from copy,
	// by what the translator adds to it (hashKey).
	hashes map[string]string
	// sourceHash is copy's content hash, for rollout revisions ("" until
	// asked for).
	sourceHash string
}

// revisionHash returns the content hash of the entry's copy.
func (e *memoEntry) revisionHash() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sourceHash == "" {
		h, err := contentHash(e.copy)
		if err != nil {
			return "", err
		}
		e.sourceHash = h
	}
	return e.sourceHash, nil
}

// maxHashesPerEntry bounds the hashes of one entry: one per distinct set
// of placements, status collectors and create-only flags among the
// mailboxes the object goes to, which is a handful. Past it, hashes are
// computed and not remembered.
const maxHashesPerEntry = 64

// copyOf returns the entry of obj, making its copy with makeCopy when the
// memo has none for this version of it. makeCopy runs without the memo's
// lock: two workers may both make it, and the first one stored is kept.
func (m *copyMemo) copyOf(obj *unstructured.Unstructured, makeCopy func() *unstructured.Unstructured) *memoEntry {
	key := weak.Make(obj)
	rv := obj.GetResourceVersion()
	m.mu.Lock()
	e, ok := m.entries[key]
	m.mu.Unlock()
	if ok && e.resourceVersion == rv {
		return e
	}
	made := &memoEntry{resourceVersion: rv, copy: makeCopy()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		if e.resourceVersion == rv {
			return e
		}
		// Edited in place: replaced below; its cleanup is registered.
		m.entries[key] = made
		return made
	}
	m.entries[key] = made
	runtime.AddCleanup(obj, m.forget, key)
	return made
}

// forget drops the entry of an object the caches no longer hold.
func (m *copyMemo) forget(key weak.Pointer[unstructured.Unstructured]) {
	m.mu.Lock()
	delete(m.entries, key)
	m.mu.Unlock()
}

// len returns how many objects the memo remembers.
func (m *copyMemo) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// hash returns the content hash remembered for what hashKey names.
func (e *memoEntry) hash(key string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.hashes[key]
	return h, ok
}

// setHash remembers a content hash (up to maxHashesPerEntry of them).
func (e *memoEntry) setHash(key, hash string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hashes == nil {
		e.hashes = map[string]string{}
	}
	if _, ok := e.hashes[key]; ok || len(e.hashes) < maxHashesPerEntry {
		e.hashes[key] = hash
	}
}

// hashKey names what write adds to a desired copy's object before hashing
// it: the create-only mark and what annotate writes, which depends on
// nothing but the fields below. Two desired copies of one memoEntry with
// the same key have the same hash, and two with different fields get
// different keys: every string, counts included, is written with its
// length and a colon before it, so no field's bytes (a status collector's
// name can hold any) pass for another's.
func (d *desiredCopy) hashKey() string {
	b := make([]byte, 0, 64)
	field := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	count := func(n int) { field(strconv.Itoa(n)) }
	b = strconv.AppendBool(b, d.createOnly)
	b = strconv.AppendBool(b, d.singleton)
	field(d.sourcePlacement)
	field(d.revision)
	placements := sortedKeys(d.placements)
	count(len(placements))
	for _, p := range placements {
		field(p)
	}
	collectors := sortedKeys(d.collectors)
	count(len(collectors))
	for _, p := range collectors {
		field(p)
		count(len(d.collectors[p]))
		for _, c := range d.collectors[p] {
			field(c)
		}
	}
	return string(b)
}

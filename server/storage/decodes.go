// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"bytes"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// recentDecodes remembers the objects a resource's storage codec decoded
// last, by their bytes, so that the same stored bytes are decoded once.
//
// Each write is decoded twice on the server that makes it: the storage
// decodes what it has just written, to answer the request with it, and the
// resource's watch decodes the same bytes moments later, to fill the watch
// cache. For a custom resource a decode is the dearest part of a write
// (JSON into maps, then the schema's coercion, which marshals and
// unmarshals the object's metadata): while 10,000 SyncTargets' mailboxes
// were made, the watches' decodes alone were 15 % of the server's CPU. A
// copy of an object decoded before costs a fraction of that.
//
// Only custom resources' decodes (unstructured objects) are remembered:
// a built-in kind's codec returns, into an object and into nothing,
// objects that differ in their apiVersion and kind, and the watch cache
// must hold what a decode into nothing returns (admission compares it
// with the object a patch makes).
//
// The memory is bounded: the last maxRecentDecodes decodes, none older
// than recentDecodeAge. A decode is a function of its bytes and its codec
// (a CRD's new schema gets a new storage, and codec), so what is returned
// is what the codec would have returned. Objects are copied in and out:
// the storage's callers change what they get (its resourceVersion first).
type recentDecodes struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries map[decodeKey]*decodedEntry
	// ring holds the keys in the order they came, for eviction.
	ring []decodeKey
	next int
	now  func() time.Time
	// hits and misses count lookups, for tests.
	hits, misses int
}

const (
	maxRecentDecodes = 1024
	recentDecodeAge  = 30 * time.Second
)

type decodeKey struct {
	codec *rememberingCodec
	hash  uint64
}

type decodedEntry struct {
	data []byte
	obj  *unstructured.Unstructured
	gvk  *schema.GroupVersionKind
	at   time.Time
}

// codec wraps c so that its decodes are remembered.
func (r *recentDecodes) codec(c runtime.Codec) runtime.Codec {
	if _, ok := c.(*rememberingCodec); ok || c == nil {
		return c
	}
	r.mu.Lock()
	if r.seed == (maphash.Seed{}) {
		r.seed = maphash.MakeSeed()
	}
	r.mu.Unlock()
	return &rememberingCodec{Codec: c, recent: r, seed: r.seed}
}

func (r *recentDecodes) lookup(key decodeKey, data []byte) *decodedEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if !ok || !bytes.Equal(e.data, data) || r.clock().Sub(e.at) > recentDecodeAge {
		r.misses++
		return nil
	}
	r.hits++
	return e
}

func (r *recentDecodes) add(key decodeKey, e *decodedEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = make(map[decodeKey]*decodedEntry, maxRecentDecodes)
		r.ring = make([]decodeKey, maxRecentDecodes)
	}
	e.at = r.clock()
	if _, ok := r.entries[key]; ok {
		r.entries[key] = e // newer bytes of the same hash, or the same again
		return
	}
	if old := r.ring[r.next]; old.codec != nil {
		delete(r.entries, old)
	}
	r.ring[r.next] = key
	r.next = (r.next + 1) % len(r.ring)
	r.entries[key] = e
}

func (r *recentDecodes) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// rememberingCodec is a storage codec whose decodes recentDecodes
// remembers.
type rememberingCodec struct {
	runtime.Codec
	recent *recentDecodes
	seed   maphash.Seed
	// typed is set once a decode returned a typed object (a built-in
	// kind's codec): its decodes then skip the lookup, which could never
	// find anything.
	typed atomic.Bool
}

func (c *rememberingCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if _, unstructuredInto := into.(*unstructured.Unstructured); defaults != nil || (into != nil && !unstructuredInto) || c.typed.Load() {
		return c.Codec.Decode(data, defaults, into)
	}
	key := decodeKey{codec: c, hash: maphash.Bytes(c.seed, data)}
	if e := c.recent.lookup(key, data); e != nil {
		copied := e.obj.DeepCopy()
		if into == nil {
			return copied, copyKind(e.gvk), nil
		}
		*into.(*unstructured.Unstructured) = *copied
		return into, copyKind(e.gvk), nil
	}
	obj, gvk, err := c.Codec.Decode(data, defaults, into)
	if err != nil {
		return obj, gvk, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		c.typed.Store(true)
		return obj, gvk, nil
	}
	c.recent.add(key, &decodedEntry{data: bytes.Clone(data), obj: u.DeepCopy(), gvk: copyKind(gvk)})
	return obj, gvk, nil
}

func copyKind(gvk *schema.GroupVersionKind) *schema.GroupVersionKind {
	if gvk == nil {
		return nil
	}
	k := *gvk
	return &k
}

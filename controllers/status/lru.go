// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"container/list"
	"sync"
)

// lruCache is a map of at most size entries that drops the least recently
// used entry to make room. It is safe for concurrent use.
type lruCache[K comparable, V any] struct {
	mu      sync.Mutex
	size    int
	order   *list.List // of *lruEntry, most recently used first
	entries map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key   K
	value V
}

func newLRU[K comparable, V any](size int) *lruCache[K, V] {
	if size < 1 {
		size = 1
	}
	return &lruCache[K, V]{size: size, order: list.New(), entries: map[K]*list.Element{}}
}

// Get returns the value of key and marks it used.
func (c *lruCache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).value, true
	}
	var zero V
	return zero, false
}

// Add sets the value of key, dropping the least recently used entry when
// the cache is full.
func (c *lruCache[K, V]) Add(key K, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		e.Value.(*lruEntry[K, V]).value = value
		c.order.MoveToFront(e)
		return
	}
	c.entries[key] = c.order.PushFront(&lruEntry[K, V]{key: key, value: value})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*lruEntry[K, V]).key)
	}
}

// Remove drops key.
func (c *lruCache[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.Remove(e)
		delete(c.entries, key)
	}
}

// Len returns the number of entries.
func (c *lruCache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Values returns the values, most recently used first, without marking
// them used.
func (c *lruCache[K, V]) Values() []V {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]V, 0, c.order.Len())
	for e := c.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*lruEntry[K, V]).value)
	}
	return out
}

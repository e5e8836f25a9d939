// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBufferPool(t *testing.T) {
	var p bufferPool
	b := p.Get()
	require.Len(t, b, proxyBufferSize)
	b[0] = 'x'
	p.Put(b[:10]) // a proxy may hand back a shorter slice of it
	again := p.Get()
	require.Len(t, again, proxyBufferSize, "a buffer comes back whole")
	p.Put(make([]byte, 100)) // not one of ours: dropped
	require.Len(t, p.Get(), proxyBufferSize)

	// Lent and returned 1,000 times, it is not made 1,000 times (the race
	// detector makes sync.Pool drop some of what it is given).
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 1000 {
		p.Put(p.Get())
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1000*proxyBufferSize/2))
}

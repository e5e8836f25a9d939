// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import "sync"

// proxyBufferSize is what httputil.ReverseProxy copies a body with when it
// has no pool: 32 KiB.
const proxyBufferSize = 32 << 10

// bufferPool is an httputil.BufferPool of proxyBufferSize buffers. It lends
// the reverse proxies of the tunnel's two ends (the center's edge proxy and
// peer forwarding, the syncer's edge handler) the buffer each copies a body
// with: without it every request through a tunnel allocated 32 KiB at each
// end, garbage for the collector to chase.
type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, proxyBufferSize)
}

func (p *bufferPool) Put(b []byte) {
	if cap(b) != proxyBufferSize {
		return
	}
	b = b[:proxyBufferSize]
	p.pool.Put(&b)
}

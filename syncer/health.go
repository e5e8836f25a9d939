// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// health answers a kubelet's probes (or a load balancer's, or a person's
// curl) for a syncer that runs in a pod:
//
//   - /livez is the process serving HTTP. It does not depend on the
//     center: a syncer that cannot reach the center keeps the edge from
//     its saved state, and restarting it would not bring the center back.
//   - /readyz is the syncer keeping the edge: it has connected to the
//     center or loaded its saved state (what OnReady announces), with the
//     status that announcement carried.
type health struct {
	status atomic.Pointer[string]
}

// setReady records the status readiness was announced with (a syncer
// built without health, as unit tests build one, records nothing).
func (h *health) setReady(status string) {
	if h != nil {
		h.status.Store(&status)
	}
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch r.URL.Path {
	case "/livez", "/healthz":
		fmt.Fprintln(w, "ok")
	case "/readyz":
		status := h.status.Load()
		if status == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: neither connected to the center nor holding a saved state yet")
			return
		}
		fmt.Fprintln(w, "ok:", *status)
	default:
		http.NotFound(w, r)
	}
}

// serveHealth serves h on addr until ctx is done. It returns once the
// address is bound, so that a port in use is an error at start.
func serveHealth(ctx context.Context, addr string, h *health) (net.Addr, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-address %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "the health endpoint stopped", "address", addr)
		}
	}()
	return l.Addr(), nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
)

// healthTimeout bounds one look at the datastore; looks are made at most
// every half of it, and a check between two gets the last look's answer
// (as Kubernetes' own check of etcd), so that /healthz, which anyone may
// ask, never loads the datastore.
const healthTimeout = 2 * time.Second

// HealthCheck is the check, named etcd as in kube-apiserver, that the
// datastore answers: a read through kine (or, for an etcd cluster, etcd's
// own probe). It belongs in /healthz, /livez and /readyz, so that a load
// balancer in front of several servers leaves out one that has lost its
// datastore.
func (d *Datastore) HealthCheck(stop <-chan struct{}) (healthz.HealthChecker, error) {
	if d.local == nil {
		check, err := factory.CreateHealthCheck(storagebackend.Config{Type: storagebackend.StorageTypeETCD3,
			Transport:          storagebackend.TransportConfig{ServerList: d.Endpoints, CertFile: d.TLS.CertFile, KeyFile: d.TLS.KeyFile, TrustedCAFile: d.TLS.CAFile},
			HealthcheckTimeout: healthTimeout}, stop)
		if err != nil {
			return nil, err
		}
		return healthz.NamedCheck("etcd", func(*http.Request) error { return check() }), nil
	}
	limiter := rate.NewLimiter(rate.Every(healthTimeout/2), 1)
	last := fmt.Errorf("the datastore has not been looked at yet")
	var mu sync.Mutex
	return healthz.NamedCheck("etcd", func(*http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		if !limiter.Allow() {
			return last
		}
		ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
		defer cancel()
		if _, err := d.local.Get(ctx, "/kubestellar/health"); err != nil {
			last = fmt.Errorf("the datastore does not answer: %w", err)
		} else {
			last = nil
		}
		return last
	}), nil
}

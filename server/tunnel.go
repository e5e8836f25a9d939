// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/tunnel"
)

// tunnelOwner is the tunnel server's Identify (principal.TunnelOwner).
func tunnelOwner(u user.Info) (tunnel.Owner, error) {
	inv, st, uid, tokenID, err := principal.TunnelOwner(u)
	return tunnel.Owner{InventorySpace: inv, SyncTarget: st, UID: uid, TokenID: tokenID}, err
}

// isTunnelRequest: tunnels and what goes through them live long; they are
// kept out of the request timeout and the in-flight limits.
func isTunnelRequest(r *http.Request) bool {
	return r.URL.Path == tunnel.Path || strings.HasPrefix(r.URL.Path, tunnel.EdgesPrefix)
}

// withTunnelsLongRunning extends a long-running-request check.
func withTunnelsLongRunning(check func(*http.Request, *request.RequestInfo) bool) func(*http.Request, *request.RequestInfo) bool {
	return func(r *http.Request, ri *request.RequestInfo) bool {
		return isTunnelRequest(r) || (check != nil && check(r, ri))
	}
}

// tunnelServer returns the server said to hold a SyncTarget's tunnel, ""
// when it is not connected.
func (c *spaceClients) tunnelServer(ctx context.Context, inv, st string) (string, error) {
	dyn, err := c.Dynamic(inv)
	if err != nil {
		return "", err
	}
	u, err := dyn.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")).Get(ctx, st, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	obj := &edgev2alpha1.SyncTarget{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return "", err
	}
	if !meta.IsStatusConditionTrue(obj.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected) {
		return "", nil
	}
	return obj.Status.TunnelServer, nil
}

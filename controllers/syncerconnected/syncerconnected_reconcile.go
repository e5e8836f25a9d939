// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncerconnected

import (
	"context"
	"encoding/json"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// writeCondition records that the SyncTarget's tunnel to server self
// opened or closed. A close is not recorded once another server holds the
// tunnel: the syncer has moved there. An open recorded at self before
// started (when self last started) was cut when that server stopped, even
// if nothing said so (kill -9): the open now starts a new period.
//
// The first attempt starts from cached's copy, when there is one; a
// conflict (the cache was behind) reads the SyncTarget from the server.
func writeCondition(ctx context.Context, clients Clients, cached func(inv, st string) (*unstructured.Unstructured, bool),
	self string, started time.Time, inv, st string, connected bool) error {
	dyn, err := clients.Dynamic(inv)
	if err != nil {
		return err
	}
	rc := dyn.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("synctargets"))
	w := conditionWriter{
		cached: func() (*unstructured.Unstructured, bool) {
			if cached == nil {
				return nil, false
			}
			return cached(inv, st)
		},
		get: func() (*unstructured.Unstructured, error) { return rc.Get(ctx, st, metav1.GetOptions{}) },
		patchStatus: func(patch []byte) error {
			_, err := rc.Patch(ctx, st, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubestellar-tunnel"}, "status")
			return err
		},
	}
	err = w.write(self, started, connected)
	if apierrors.IsNotFound(err) {
		return nil // the SyncTarget is gone
	}
	return err
}

// conditionWriter is writeCondition's logic over one
// SyncTarget's reads and writes.
type conditionWriter struct {
	// cached returns the cache's copy, not to be changed: the SyncTarget's
	// identity and the status fields the write reads and sets
	// (auth.CachedSyncTargetFields), no more.
	cached func() (*unstructured.Unstructured, bool)
	get    func() (*unstructured.Unstructured, error)
	// patchStatus sends a JSON merge patch (statusPatch) to the
	// status subresource.
	patchStatus func(patch []byte) error
}

// statusPatch is what the tunnel writes of a SyncTarget: its
// conditions and tunnel server, at the resourceVersion they were decided
// on, so that a write decided on a stale copy is refused (a conflict)
// rather than applied; the rest of the status, which the syncer writes, is
// left as it is.
type statusPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions"`
		// TunnelServer nil (null) removes the field.
		TunnelServer *string `json:"tunnelServer"`
	} `json:"status"`
}

func (w conditionWriter) write(self string, started time.Time, connected bool) error {
	// update writes the condition on u, unless u says so already.
	update := func(u *unstructured.Unstructured) (wrote bool, err error) {
		obj := &edgev2alpha1.SyncTarget{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return false, err
		}
		cond := metav1.Condition{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: metav1.ConditionTrue,
			Reason: "TunnelOpen", Message: "the syncer's tunnel to " + self + " is open", ObservedGeneration: obj.Generation}
		server := self
		if !connected {
			if obj.Status.TunnelServer != "" && obj.Status.TunnelServer != self {
				return false, nil
			}
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "TunnelClosed", "the syncer's tunnel to the server is closed"
			server = ""
		} else if old := meta.FindStatusCondition(obj.Status.Conditions, cond.Type); old != nil && old.Status == metav1.ConditionTrue &&
			obj.Status.TunnelServer == self && !old.LastTransitionTime.Time.After(started.Truncate(time.Second)) {
			// (Times are kept to the second: one of this server's first
			// second may count as before it, which at worst records a
			// reconnection as one.)
			cond.Reason, cond.Message = "TunnelReopened", "the syncer's tunnel to "+self+" is open again: it was cut when that server last stopped"
			meta.RemoveStatusCondition(&obj.Status.Conditions, cond.Type)
		}
		changed := meta.SetStatusCondition(&obj.Status.Conditions, cond)
		if !changed && obj.Status.TunnelServer == server {
			return false, nil
		}
		var patch statusPatch
		patch.Metadata.ResourceVersion = obj.ResourceVersion
		patch.Status.Conditions = obj.Status.Conditions
		if server != "" {
			patch.Status.TunnelServer = &server
		}
		data, err := json.Marshal(patch)
		if err != nil {
			return false, err
		}
		return true, w.patchStatus(data)
	}
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if first {
			first = false
			if c, ok := w.cached(); ok {
				// A conflict means the cache was behind: the retry reads.
				if wrote, err := update(c.DeepCopy()); wrote || err != nil {
					return err
				}
				// Nothing to write by the cache's copy, which may be
				// behind: decide again on the server's.
			}
		}
		u, err := w.get()
		if err != nil {
			return err
		}
		_, err = update(u)
		return err
	})
}

// connectedSyncTarget is a SyncTarget said connected, with its inventory
// space and the condition that says so.
type connectedSyncTarget struct {
	*edgev2alpha1.SyncTarget
	inv  string
	cond *metav1.Condition
}

// connectedSyncTargets lists the SyncTargets of every space whose
// SyncerConnected is True.
func connectedSyncTargets(ctx context.Context, clients Clients) ([]connectedSyncTarget, error) {
	dyn, err := clients.Dynamic(spaces.Wildcard)
	if err != nil {
		return nil, err
	}
	list, err := dyn.Resource(edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []connectedSyncTarget
	for i := range list.Items {
		u := &list.Items[i]
		obj := &edgev2alpha1.SyncTarget{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			continue
		}
		inv := u.GetAnnotations()[spaces.Annotation]
		cond := meta.FindStatusCondition(obj.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected)
		if inv != "" && cond != nil && cond.Status == metav1.ConditionTrue {
			out = append(out, connectedSyncTarget{SyncTarget: obj, inv: inv, cond: cond})
		}
	}
	return out, nil
}

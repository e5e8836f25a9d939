// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncerconnected

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
)

const selfURL = "https://server-a:6443"

// syncTargetWith is edge1 at resourceVersion rv with SyncerConnected as
// given, its tunnel at server (when connected).
func syncTargetWith(t *testing.T, rv string, connected bool, server string) *unstructured.Unstructured {
	t.Helper()
	st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge1", ResourceVersion: rv}}
	cond := metav1.Condition{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: metav1.ConditionFalse, Reason: "TunnelClosed",
		Message: "the syncer's tunnel to the server is closed", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}
	if connected {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "TunnelOpen", "the syncer's tunnel to "+server+" is open"
		st.Status.TunnelServer = server
	}
	meta.SetStatusCondition(&st.Status.Conditions, cond)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: obj}
}

// fakeSyncTarget is one SyncTarget on a server and in a cache that may be
// behind it; writes check the resourceVersion as the API server does.
type fakeSyncTarget struct {
	t             *testing.T
	server, cache *unstructured.Unstructured
	gets, updates int
}

func (f *fakeSyncTarget) writer() conditionWriter {
	return conditionWriter{
		cached: func() (*unstructured.Unstructured, bool) { return f.cache, f.cache != nil },
		get: func() (*unstructured.Unstructured, error) {
			f.gets++
			return f.server.DeepCopy(), nil
		},
		patchStatus: func(patch []byte) error {
			// As the API server applies a JSON merge patch: a
			// resourceVersion in it must be the object's.
			f.updates++
			var p struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			require.NoError(f.t, json.Unmarshal(patch, &p))
			if p.Metadata.ResourceVersion != f.server.GetResourceVersion() {
				return apierrors.NewConflict(schema.GroupResource{Group: "edge.kubestellar.io", Resource: "synctargets"}, "edge1", errors.New("stale"))
			}
			current, err := json.Marshal(f.server.Object)
			require.NoError(f.t, err)
			merged, err := jsonpatch.MergePatch(current, patch)
			require.NoError(f.t, err)
			server := &unstructured.Unstructured{}
			require.NoError(f.t, json.Unmarshal(merged, &server.Object))
			server.SetResourceVersion(p.Metadata.ResourceVersion + "+")
			f.server = server
			return nil
		},
	}
}

func (f *fakeSyncTarget) connected() (string, string) {
	st := &edgev2alpha1.SyncTarget{}
	require.NoError(f.t, runtime.DefaultUnstructuredConverter.FromUnstructured(f.server.Object, st))
	c := meta.FindStatusCondition(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected)
	return string(c.Status) + "/" + c.Reason, st.Status.TunnelServer
}

// TestTunnelConditionWriterCache: the writer starts from the cache's copy
// to save a read, but never takes it for the server's word.
func TestTunnelConditionWriterCache(t *testing.T) {
	t.Run("an up-to-date cache: one write, no read", func(t *testing.T) {
		f := &fakeSyncTarget{t: t, server: syncTargetWith(t, "5", true, selfURL)}
		f.cache = f.server.DeepCopy()
		require.NoError(t, f.writer().write(selfURL, time.Now(), false))
		require.Equal(t, [2]int{0, 1}, [2]int{f.gets, f.updates})
		cond, server := f.connected()
		require.Equal(t, "False/TunnelClosed", cond)
		require.Empty(t, server)
	})
	t.Run("a cache behind that wants a write: the conflict reads the server", func(t *testing.T) {
		f := &fakeSyncTarget{t: t, server: syncTargetWith(t, "7", true, selfURL), cache: syncTargetWith(t, "5", true, selfURL)}
		require.NoError(t, f.writer().write(selfURL, time.Now(), false))
		require.Equal(t, [2]int{1, 2}, [2]int{f.gets, f.updates})
		cond, _ := f.connected()
		require.Equal(t, "False/TunnelClosed", cond)
	})
	t.Run("a cache behind that says it is done already: the server decides", func(t *testing.T) {
		// The cache still shows the tunnel closed; the server has its
		// open since. Closing it again must be written.
		f := &fakeSyncTarget{t: t, server: syncTargetWith(t, "7", true, selfURL), cache: syncTargetWith(t, "5", false, "")}
		require.NoError(t, f.writer().write(selfURL, time.Now(), false))
		require.Equal(t, [2]int{1, 1}, [2]int{f.gets, f.updates})
		cond, _ := f.connected()
		require.Equal(t, "False/TunnelClosed", cond)
	})
	t.Run("nothing to write, by the cache and the server", func(t *testing.T) {
		f := &fakeSyncTarget{t: t, server: syncTargetWith(t, "7", false, "")}
		f.cache = f.server.DeepCopy()
		require.NoError(t, f.writer().write(selfURL, time.Now(), false))
		require.Equal(t, [2]int{1, 0}, [2]int{f.gets, f.updates})
	})
	t.Run("another server holds the tunnel now: its open stands", func(t *testing.T) {
		f := &fakeSyncTarget{t: t, server: syncTargetWith(t, "7", true, "https://server-b:6443"), cache: syncTargetWith(t, "5", true, selfURL)}
		require.NoError(t, f.writer().write(selfURL, time.Now(), false))
		cond, server := f.connected()
		require.Equal(t, "True/TunnelOpen", cond)
		require.Equal(t, "https://server-b:6443", server)
	})
	t.Run("the cache holds only what the write reads: the rest of the status stands", func(t *testing.T) {
		f := &fakeSyncTarget{t: t, server: syncTargetWith(t, "5", true, selfURL)}
		require.NoError(t, unstructured.SetNestedField(f.server.Object, "v1.2.3", "status", "syncerVersion"))
		require.NoError(t, unstructured.SetNestedField(f.server.Object, "2026-11-28T10:00:00Z", "status", "lastSyncerHeartbeatTime"))
		require.NoError(t, unstructured.SetNestedField(f.server.Object, "edge", "spec", "cell"))
		slim, err := spaces.KeepOnly(auth.CachedSyncTargetFields...)(f.server.DeepCopy())
		require.NoError(t, err)
		f.cache = slim.(*unstructured.Unstructured)
		_, found, _ := unstructured.NestedFieldNoCopy(f.cache.Object, "status", "syncerVersion")
		require.False(t, found, "the cache keeps only the fields the write reads")
		require.NoError(t, f.writer().write(selfURL, time.Now(), false))
		require.Equal(t, [2]int{0, 1}, [2]int{f.gets, f.updates}, "one write from the cache's copy")
		cond, server := f.connected()
		require.Equal(t, "False/TunnelClosed", cond)
		require.Empty(t, server)
		_, found, _ = unstructured.NestedFieldNoCopy(f.server.Object, "status", "tunnelServer")
		require.False(t, found, "a closed tunnel's server is removed")
		v, _, _ := unstructured.NestedString(f.server.Object, "status", "syncerVersion")
		beat, _, _ := unstructured.NestedString(f.server.Object, "status", "lastSyncerHeartbeatTime")
		cell, _, _ := unstructured.NestedString(f.server.Object, "spec", "cell")
		require.Equal(t, []string{"v1.2.3", "2026-11-28T10:00:00Z", "edge"}, []string{v, beat, cell})

		// And open again, through another server.
		f.cache = f.server.DeepCopy()
		require.NoError(t, f.writer().write("https://server-b:6443", time.Now(), true))
		cond, server = f.connected()
		require.Equal(t, "True/TunnelOpen", cond)
		require.Equal(t, "https://server-b:6443", server)
		v, _, _ = unstructured.NestedString(f.server.Object, "status", "syncerVersion")
		require.Equal(t, "v1.2.3", v)
	})
	t.Run("the cache's copy is not changed", func(t *testing.T) {
		f := &fakeSyncTarget{t: t, server: syncTargetWith(t, "5", true, selfURL)}
		f.cache = f.server.DeepCopy()
		before := f.cache.DeepCopy()
		require.NoError(t, f.writer().write(selfURL, time.Now(), false))
		require.Equal(t, before, f.cache)
	})
}

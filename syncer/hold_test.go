// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHoldHoldsEveryChange: while the edge holds, neither an update nor a
// delete from the mailbox reaches the edge cluster, and the status counts
// what waits; when the hold ends (released, or its --until passed) what
// waited is queued again and applied. A hold file that cannot be read
// holds, and says why.
func TestHoldHoldsEveryChange(t *testing.T) {
	ctx := context.Background()
	const cm = "app/cfg"
	key := objKey{GVR: configMapsGVR, Namespace: "app", Name: "cfg"}
	e := newFakeEdge(t)
	s := newDriftSyncer(e)
	dir := t.TempDir()
	s.opts, s.out = &Options{DataDir: dir}, io.Discard
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	want := func(d *desired) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if d == nil {
			delete(s.desired, key)
			return
		}
		s.desired[key] = d
	}
	reconcile := func() {
		t.Helper()
		_, err := s.reconcileDownsync(ctx, key)
		require.NoError(t, err)
		e.seen(cm)
	}
	data := func() string {
		obj, ok := e.objs[cm]
		if !ok {
			return "<deleted>"
		}
		v, _, _ := unstructured.NestedString(obj.Object, "data", "mode")
		return v
	}
	queued := func() bool {
		for s.downQ.Len() > 0 {
			k, _ := s.downQ.Get()
			s.downQ.Done(k)
			if k == key {
				return true
			}
		}
		return false
	}

	want(placedConfigMap(t, map[string]any{"mode": "placed"}, false))
	reconcile()
	require.Equal(t, "placed", data())
	require.Nil(t, s.holdStatus(), "no hold")

	require.NoError(t, WriteHold(dir, Hold{Since: now, Reason: "store open"}))
	require.NotNil(t, s.loadHold(ctx))
	want(placedConfigMap(t, map[string]any{"mode": "changed"}, false))
	reconcile()
	require.Equal(t, "placed", data(), "an update waits")
	want(nil)
	reconcile()
	require.Equal(t, "placed", data(), "a delete waits")
	st := s.holdStatus()
	require.NotNil(t, st)
	require.Equal(t, "store open", st.Reason)
	require.EqualValues(t, 1, st.Waiting)
	require.Nil(t, st.Until)

	// Released: what waited is looked at again, and applied.
	want(placedConfigMap(t, map[string]any{"mode": "after"}, false))
	was, err := ReleaseHold(dir)
	require.NoError(t, err)
	require.True(t, was)
	require.Nil(t, s.loadHold(ctx))
	require.True(t, queued(), "released: the object that waited is queued again")
	reconcile()
	require.Equal(t, "after", data())
	require.Nil(t, s.holdStatus())

	// A hold with an end holds until then, and ends by itself.
	until := now.Add(time.Hour)
	require.NoError(t, WriteHold(dir, Hold{Since: now, Until: &until}))
	require.NotNil(t, s.loadHold(ctx))
	want(placedConfigMap(t, map[string]any{"mode": "later"}, false))
	reconcile()
	require.Equal(t, "after", data())
	now = until
	require.Nil(t, s.loadHold(ctx), "its --until passed")
	require.True(t, queued())
	reconcile()
	require.Equal(t, "later", data())

	// A file that is not a hold holds, and says why.
	require.NoError(t, os.WriteFile(filepath.Join(dir, HoldFile), []byte("{not json"), 0o600))
	require.NotNil(t, s.loadHold(ctx))
	require.Contains(t, s.holdStatus().Reason, "unreadable hold file")
	want(placedConfigMap(t, map[string]any{"mode": "blocked"}, false))
	reconcile()
	require.Equal(t, "later", data())
}

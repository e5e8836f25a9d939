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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// TestUpdateWindows: outside its SyncTarget's update windows the syncer
// holds every change, reports when the next window opens and how many
// objects wait, and brings them in step when it opens; the windows it
// read are kept in the data directory for a restart without the center.
func TestUpdateWindows(t *testing.T) {
	ctx := context.Background()
	const cm = "app/cfg"
	key := objKey{GVR: configMapsGVR, Namespace: "app", Name: "cfg"}
	e := newFakeEdge(t)
	s := newDriftSyncer(e)
	dir := t.TempDir()
	s.opts, s.out, s.windowsChanged = &Options{DataDir: dir}, io.Discard, make(chan struct{}, 1)
	now := time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	want := func(mode string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.desired[key] = placedConfigMap(t, map[string]any{"mode": mode}, false)
	}
	reconcile := func() {
		t.Helper()
		_, err := s.reconcileDownsync(ctx, key)
		require.NoError(t, err)
		e.seen(cm)
	}
	data := func() string {
		v, _, _ := unstructured.NestedString(e.objs[cm].Object, "data", "mode")
		return v
	}

	want("placed")
	reconcile()
	require.Equal(t, "placed", data())
	require.Nil(t, s.windowStatus(), "no windows, no window status")

	// A window at 02:00 for an hour, read with the SyncTarget at 01:00.
	windows := []edgev2alpha1.UpdateWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}}
	s.setWindows(ctx, windows)
	select {
	case <-s.windowsChanged:
	default:
		t.Fatal("new windows wake the hold's watch")
	}
	wake := s.settle(ctx)
	require.True(t, wake.Equal(time.Date(2030, 1, 1, 2, 0, 0, 0, time.UTC)), "wakes when the window opens: %s", wake)
	want("changed")
	reconcile()
	require.Equal(t, "placed", data(), "outside the window the change waits")
	st := s.windowStatus()
	require.False(t, st.Open)
	require.EqualValues(t, 1, st.Waiting)
	require.True(t, st.NextChange.Time.Equal(wake))
	require.Nil(t, s.holdStatus(), "a window is not a hold")

	// Kept for a restart without the center.
	_, err := os.Stat(filepath.Join(dir, WindowsFile))
	require.NoError(t, err)
	restarted := newDriftSyncer(e)
	restarted.opts, restarted.out, restarted.now = s.opts, io.Discard, s.now
	restarted.loadWindows(ctx)
	require.True(t, restarted.windows.Any())

	// The window opens: what waited is queued, and applied.
	now = wake
	wake = s.settle(ctx)
	require.True(t, wake.Equal(time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC)), "then wakes when it closes: %s", wake)
	require.Equal(t, 1, s.downQ.Len(), "what waited is queued again")
	reconcile()
	require.Equal(t, "changed", data())
	require.True(t, s.windowStatus().Open)

	// Windows removed: the file goes, and changes pass at any time.
	s.setWindows(ctx, nil)
	_, err = os.Stat(filepath.Join(dir, WindowsFile))
	require.True(t, os.IsNotExist(err))
	now = time.Date(2030, 1, 1, 5, 0, 0, 0, time.UTC)
	s.settle(ctx)
	want("any time")
	reconcile()
	require.Equal(t, "any time", data())

	// Windows the syncer cannot read (a server of another release) leave
	// the last ones in place.
	s.setWindows(ctx, windows)
	s.setWindows(ctx, []edgev2alpha1.UpdateWindow{{Schedule: "nonsense", Duration: metav1.Duration{Duration: time.Hour}}})
	require.Equal(t, windows, s.windowSpec)
}

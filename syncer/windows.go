// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/internal/windows"
)

// A SyncTarget's update windows (spec.updateWindows) say when its edge
// takes changes; outside them the syncer holds, as for a hold (hold.go).
// The syncer reads them with its SyncTarget at each heartbeat and keeps
// the last ones it read in WindowsFile, so that they hold across a restart
// and while the center is unreachable.

// WindowsFile keeps the last update windows read, in the data directory.
const WindowsFile = "update-windows.json"

// loadWindows reads the windows the syncer kept; a file that cannot be
// read is said and left out (the center's copy comes with the next
// heartbeat).
func (s *Syncer) loadWindows(ctx context.Context) {
	data, err := os.ReadFile(filepath.Join(s.opts.DataDir, WindowsFile))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var ws []edgev2alpha1.UpdateWindow
	if err == nil {
		err = json.Unmarshal(data, &ws)
	}
	if err == nil {
		err = s.useWindows(ws)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "the update windows kept in the data directory cannot be read: taking changes at any time until the SyncTarget's are read", "file", WindowsFile)
	}
}

// setWindows takes the SyncTarget's windows, when they changed: kept in
// the data directory, and the hold settled again.
func (s *Syncer) setWindows(ctx context.Context, ws []edgev2alpha1.UpdateWindow) {
	s.mu.Lock()
	same := apiequality.Semantic.DeepEqual(s.windowSpec, ws) || (len(s.windowSpec) == 0 && len(ws) == 0)
	s.mu.Unlock()
	if same {
		return
	}
	logger := klog.FromContext(ctx)
	if err := s.useWindows(ws); err != nil {
		// The server's admission checks them: a server of another release.
		logger.Error(err, "the SyncTarget's update windows cannot be read: keeping the last ones")
		return
	}
	path := filepath.Join(s.opts.DataDir, WindowsFile)
	var err error
	if len(ws) == 0 {
		if err = os.Remove(path); errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	} else {
		var data []byte
		if data, err = json.Marshal(ws); err == nil {
			err = certs.WriteFileAtomic(path, data, 0o600)
		}
	}
	if err != nil {
		logger.Error(err, "cannot keep the update windows in the data directory: a restart without the center would take changes at any time", "file", path)
	}
	logger.Info("the SyncTarget's update windows changed", "windows", len(ws))
	select {
	case s.windowsChanged <- struct{}{}:
	default:
	}
}

// useWindows parses windows and makes them the syncer's.
func (s *Syncer) useWindows(ws []edgev2alpha1.UpdateWindow) error {
	sched, err := windows.Parse(ws)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.windows, s.windowSpec = sched, ws
	s.mu.Unlock()
	return nil
}

// windowStatus is the windows as the SyncTarget's status reports them (nil
// when it has none).
func (s *Syncer) windowStatus() *edgev2alpha1.UpdateWindowStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.windows.Any() {
		return nil
	}
	open, change := s.windows.At(s.now())
	out := &edgev2alpha1.UpdateWindowStatus{Open: open}
	if !change.IsZero() {
		t := metav1.NewTime(change)
		out.NextChange = &t
	}
	if !open {
		out.Waiting = int32(len(s.heldBack))
	}
	return out
}

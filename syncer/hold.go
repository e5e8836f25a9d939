// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/certs"
)

// An edge that must not change now (a store during opening hours, a
// vehicle on the move) holds: `kubestellar syncer hold` writes HoldFile
// into the syncer's data directory, and while the hold lasts the syncer
// writes nothing to its cluster: no create, update or delete from the
// mailbox, no revert of drift. It goes on reading the mailbox, reporting
// status and upsyncing, and reports the hold, with how many objects wait,
// on its SyncTarget. The hold is the edge's: it lives at the edge, so it
// holds across restarts of the syncer and while the center is unreachable;
// the center cannot lift it. When it ends (`kubestellar syncer release`,
// or its --until passes) every object that waited is brought in step.

// HoldFile is the hold, in the syncer's data directory.
const HoldFile = "hold.json"

// Hold is a hold on changes at the edge.
type Hold struct {
	Since time.Time `json:"since"`
	// Until is when the hold ends by itself (nil: when released).
	Until  *time.Time `json:"until,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// ActiveAt reports whether the hold holds at a time.
func (h *Hold) ActiveAt(now time.Time) bool {
	return h != nil && (h.Until == nil || now.Before(*h.Until))
}

// ReadHold reads the hold in a data directory: nil when there is none. A
// file that cannot be read as a hold is an error (the syncer then holds:
// the file's being there says someone wanted a hold).
func ReadHold(dataDir string) (*Hold, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, HoldFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h := &Hold{}
	if err := json.Unmarshal(data, h); err != nil {
		return nil, fmt.Errorf("%s is not a hold: %w", filepath.Join(dataDir, HoldFile), err)
	}
	if h.Since.IsZero() {
		return nil, fmt.Errorf("%s is not a hold: it says not since when", filepath.Join(dataDir, HoldFile))
	}
	return h, nil
}

// WriteHold writes a hold into a data directory, in place of any other.
func WriteHold(dataDir string, h Hold) error {
	if len(h.Reason) > edgev2alpha1.MaxHoldReasonLength {
		return fmt.Errorf("the reason is %d bytes; at most %d", len(h.Reason), edgev2alpha1.MaxHoldReasonLength)
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	return certs.WriteFileAtomic(filepath.Join(dataDir, HoldFile), data, 0o600)
}

// ReleaseHold removes the hold of a data directory, and reports whether
// there was one.
func ReleaseHold(dataDir string) (bool, error) {
	err := os.Remove(filepath.Join(dataDir, HoldFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// holdReread is how often the hold is read again when its file cannot be
// watched, and as a safety net when it can.
const holdReread = 30 * time.Second

// holding reports whether the syncer holds now (a hold, or outside the
// SyncTarget's update windows); if so it remembers key as waiting, to be
// looked at again when it stops holding.
func (s *Syncer) holding(key objKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if open, _ := s.windows.At(now); open && !s.hold.ActiveAt(now) {
		return false
	}
	if s.heldBack == nil {
		s.heldBack = map[objKey]bool{}
	}
	s.heldBack[key] = true
	return true
}

// loadHold reads the hold file, says when a hold began or changed, and
// settles what the syncer holds (settle). It returns the hold now in force
// (nil for none).
func (s *Syncer) loadHold(ctx context.Context) *Hold {
	logger := klog.FromContext(ctx)
	h, err := ReadHold(s.opts.DataDir)
	if err != nil {
		logger.Error(err, "the hold file cannot be read: holding every change until it is fixed or removed (kubestellar syncer release)")
		h = &Hold{Since: s.now(), Reason: "unreadable hold file: " + err.Error()}
		if len(h.Reason) > edgev2alpha1.MaxHoldReasonLength {
			h.Reason = h.Reason[:edgev2alpha1.MaxHoldReasonLength]
		}
	}
	now := s.now()
	s.mu.Lock()
	was := s.hold.ActiveAt(now)
	is := h.ActiveAt(now)
	changed := !sameHold(s.hold, h)
	s.hold = h
	s.mu.Unlock()
	if is && (!was || changed) {
		until := "released"
		if h.Until != nil {
			until = h.Until.Format(time.RFC3339)
		}
		logger.Info("holding every change to the edge cluster", "since", h.Since, "until", until, "reason", h.Reason)
		s.progress("holding every change to the edge cluster (kubestellar syncer release ends it)")
	}
	if changed {
		s.reportSoon()
	}
	s.settle(ctx)
	if is {
		return h
	}
	return nil
}

// settle works out whether the syncer holds now (a hold, or outside the
// update windows) and, when it stops holding, queues every object that
// waited. It returns when that may change by itself next: a hold's --until
// or a window's opening or closing (zero for neither).
func (s *Syncer) settle(ctx context.Context) time.Time {
	logger := klog.FromContext(ctx)
	now := s.now()
	s.mu.Lock()
	open, change := s.windows.At(now)
	wake := change
	held := s.hold.ActiveAt(now)
	was, wasClosed := s.holdOn, s.windowClosed
	is := held || !open
	s.holdOn, s.windowClosed = is, !open
	var waiting []objKey
	if was && !is {
		for k := range s.heldBack {
			waiting = append(waiting, k)
		}
		s.heldBack = map[objKey]bool{}
	}
	if held && s.hold.Until != nil && (wake.IsZero() || s.hold.Until.Before(wake)) {
		wake = *s.hold.Until
	}
	s.mu.Unlock()
	switch {
	case !open && !wasClosed:
		logger.Info("outside the SyncTarget's update windows: holding every change to the edge cluster", "opens", change)
		s.progress("outside the update windows: holding every change until %s", change.Format(time.RFC3339))
	case open && wasClosed:
		logger.Info("an update window is open", "closes", change)
	}
	if was && !is {
		logger.Info("no longer holding: bringing what waited in step", "objects", len(waiting))
		s.progress("no longer holding: %d objects waited", len(waiting))
		for _, k := range waiting {
			s.downQ.Add(k)
		}
	}
	if windowChanged := wasClosed == open; was != is || windowChanged {
		s.reportSoon()
	}
	return wake
}

func sameHold(a, b *Hold) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Since.Equal(b.Since) && a.Reason == b.Reason &&
		((a.Until == nil && b.Until == nil) || (a.Until != nil && b.Until != nil && a.Until.Equal(*b.Until)))
}

// watchHold follows the hold file and the update windows until ctx is
// done: at once when the file is written or removed or the SyncTarget's
// windows change, when a hold's --until passes or a window opens or
// closes, and every holdReread.
func (s *Syncer) watchHold(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		logger.Error(err, "cannot watch the data directory for a hold: reading it every 30s instead")
	} else {
		defer w.Close()
		if err := w.Add(s.opts.DataDir); err != nil {
			logger.Error(err, "cannot watch the data directory for a hold: reading it every 30s instead", "dir", s.opts.DataDir)
		} else {
			events, errs = w.Events, w.Errors
		}
	}
	reread := time.NewTicker(holdReread)
	defer reread.Stop()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		s.loadHold(ctx)
		var due <-chan time.Time
		if wake := s.settle(ctx); !wake.IsZero() {
			timer = time.NewTimer(time.Until(wake))
			due = timer.C
		}
		if !waitForHoldChange(ctx, events, errs, s.windowsChanged, due, reread.C) {
			return
		}
	}
}

// waitForHoldChange returns when the hold file or the windows may have
// changed, or a time came; false when ctx is done.
func waitForHoldChange(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, windowsChanged <-chan struct{}, expired, reread <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev := <-events:
			if filepath.Base(ev.Name) == HoldFile {
				return true
			}
		case err := <-errs:
			klog.FromContext(ctx).Error(err, "watching the data directory for a hold")
		case <-windowsChanged:
			return true
		case <-expired:
			return true
		case <-reread:
			return true
		}
	}
}

// holdStatus is the hold as the SyncTarget's status reports it (nil when
// the syncer does not hold).
func (s *Syncer) holdStatus() *edgev2alpha1.EdgeHold {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hold
	if !h.ActiveAt(s.now()) {
		return nil
	}
	out := &edgev2alpha1.EdgeHold{Since: metav1.NewTime(h.Since), Reason: h.Reason, Waiting: int32(len(s.heldBack))}
	if h.Until != nil {
		until := metav1.NewTime(*h.Until)
		out.Until = &until
	}
	return out
}

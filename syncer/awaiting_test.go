// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/client-go/util/workqueue"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// An object whose namespace is not yet at the edge waits for it: it is
// applied again when the namespace is, and reported only if the namespace
// fails or does not come.
func TestAnObjectWaitsForItsNamespace(t *testing.T) {
	cm := objKey{GVR: configMapsGVR, Namespace: "live", Name: "obj-1"}
	ns := objKey{GVR: namespacesGVR, Name: "live"}
	missing := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "live")
	newSyncer := func(t *testing.T) *Syncer {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objKey]())
		t.Cleanup(q.ShutDown)
		return &Syncer{downQ: q, reportQ: q, desired: map[objKey]*desired{cm: {Key: cm}}, inStep: map[objKey]bool{},
			problems: map[objKey]problem{}, awaiting: map[string]map[objKey]bool{}}
	}
	// fail makes the apply of cm fail after retries earlier failures.
	fail := func(t *testing.T, s *Syncer, retries int) {
		t.Helper()
		for s.downQ.NumRequeues(cm) < retries {
			s.downQ.AddRateLimited(cm)
		}
		require.Error(t, s.applyFailed(context.Background(), cm, s.desired[cm], missing))
	}
	reported := func(s *Syncer) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, ok := s.problems[cm]
		return ok && p.Reason == edgev2alpha1.SyncReasonRejected
	}

	t.Run("on its way", func(t *testing.T) {
		s := newSyncer(t)
		fail(t, s, retriesBeforeReporting)
		require.False(t, reported(s), "a namespace on its way is not a problem yet")
		fail(t, s, retriesBeforeReportingNamespace)
		require.True(t, reported(s), "a namespace that does not come is")
	})
	t.Run("refused at the edge", func(t *testing.T) {
		s := newSyncer(t)
		s.desired[ns] = &desired{Key: ns}
		s.problems[ns] = problem{Reason: edgev2alpha1.SyncReasonRejected, Message: "forbidden"}
		fail(t, s, retriesBeforeReporting-1)
		require.False(t, reported(s))
		fail(t, s, retriesBeforeReporting)
		require.True(t, reported(s), "what waits for a namespace that failed says so soon")
	})
	t.Run("applied when the namespace is", func(t *testing.T) {
		s := newSyncer(t)
		fail(t, s, 0)
		for s.downQ.Len() > 0 { // what the failure queued (the namespace, if desired)
			k, _ := s.downQ.Get()
			s.downQ.Done(k)
		}
		s.setInStep(ns)
		require.Equal(t, 1, s.downQ.Len(), "the waiting object is queued at once")
		k, _ := s.downQ.Get()
		require.Equal(t, cm, k)
		s.downQ.Done(k)
		require.Empty(t, s.awaiting)
	})
	t.Run("forgotten when it leaves the mailbox", func(t *testing.T) {
		s := newSyncer(t)
		fail(t, s, 0)
		require.Len(t, s.awaiting["live"], 1)
		s.clearState(cm)
		require.Empty(t, s.awaiting)
	})
}

// The mailbox's caches list, then watch: the server refuses watch-list,
// and every cache asking first would cost it a refused request.
func TestMailboxCachesListThenWatch(t *testing.T) {
	require.True(t, watchlist.DoesClientNotSupportWatchListSemantics(listThenWatch{}))
}

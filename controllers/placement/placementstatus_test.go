// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

func TestProgressOnly(t *testing.T) {
	status := func(edit func(s *edgev2alpha1.RolloutStatus)) *edgev2alpha1.RolloutStatus {
		s := &edgev2alpha1.RolloutStatus{Revision: "r2", CompletedRevision: "r1", Phase: edgev2alpha1.RolloutPhaseProgressing,
			CurrentWave: "canary", Message: "wave canary: waiting for inv/e1 (its syncer has not reported on the revision yet)",
			Waves: []edgev2alpha1.RolloutWaveStatus{{Name: "canary", Destinations: 10, Updated: 3}, {Name: "rest", Destinations: 90}}}
		if edit != nil {
			edit(s)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		now  *edgev2alpha1.RolloutStatus
		want bool
	}{
		{name: "more updated, another message", now: status(func(s *edgev2alpha1.RolloutStatus) {
			s.Waves[0].Updated, s.Waves[0].Healthy, s.Message = 5, 2, "wave canary: waiting for inv/e4 (on its way)"
			s.Destinations = []edgev2alpha1.RolloutDestination{{SyncTarget: "inv/e4", Wave: "canary", State: edgev2alpha1.RolloutStateHeld}}
		}), want: true},
		{name: "a new revision", now: status(func(s *edgev2alpha1.RolloutStatus) { s.Revision = "r3" })},
		{name: "a revision completed", now: status(func(s *edgev2alpha1.RolloutStatus) { s.CompletedRevision = "r2" })},
		{name: "paused", now: status(func(s *edgev2alpha1.RolloutStatus) { s.Phase = edgev2alpha1.RolloutPhasePaused })},
		{name: "the next wave", now: status(func(s *edgev2alpha1.RolloutStatus) { s.CurrentWave = "rest" })},
		{name: "a failure", now: status(func(s *edgev2alpha1.RolloutStatus) { s.Waves[0].Failed = 1 })},
		{name: "another set of waves", now: status(func(s *edgev2alpha1.RolloutStatus) { s.Waves = s.Waves[:1] })},
		{name: "none any more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, progressOnly(status(nil), tc.now))
		})
	}
	require.False(t, progressOnly(nil, status(nil)), "the first status")
}

// TestRolloutProgressWritesPaced: a wave's progress is written in the
// placement's status at most every statusSpacing, the rest waiting in the
// queue; a failure is written at once.
func TestRolloutProgressWritesPaced(t *testing.T) {
	ctx := context.Background()
	scheme, err := crossspace.NewScheme()
	require.NoError(t, err)
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, Annotations: map[string]string{spaces.Annotation: "wds1"}},
		Spec: edgev2alpha1.EdgePlacementSpec{Rollout: &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}}}
	var writes atomic.Int32
	fc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ep).WithStatusSubresource(ep).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.Add(1)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}).Build()
	placements := &crossspace.Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})}
	c := &Controller{clients: &crossspace.Clients{Client: fc, Scheme: scheme}, placements: placements, rolls: newRolloutTracker(),
		problems: map[string]map[string][]problem{}, dependencies: map[string]map[string][]edgev2alpha1.DependencyReference{},
		statuses: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	t.Cleanup(c.statuses.ShutDown)
	key := spaces.Key("wds1", "", "p")
	// look is a look of the rollout that left status, and the write (or
	// not) that follows, with the cache then brought up to date.
	look := func(updated, failed int32) {
		t.Helper()
		c.rolls.byPlacement[key] = &rolloutState{revision: "r2", status: &edgev2alpha1.RolloutStatus{Revision: "r2",
			Phase: edgev2alpha1.RolloutPhaseProgressing, CurrentWave: "canary",
			Waves: []edgev2alpha1.RolloutWaveStatus{{Name: "canary", Destinations: 10, Updated: updated, Failed: failed}}}}
		require.NoError(t, c.updatePlacementStatus(ctx, key))
		stored := &edgev2alpha1.EdgePlacement{}
		require.NoError(t, fc.Get(ctx, client.ObjectKeyFromObject(ep), stored))
		stored.Annotations = ep.Annotations
		require.NoError(t, placements.Indexer.Update(stored))
	}
	require.NoError(t, placements.Indexer.Add(ep))

	look(1, 0)
	require.Equal(t, int32(1), writes.Load(), "the rollout's first status is written at once")
	look(2, 0)
	require.Equal(t, int32(1), writes.Load(), "progress within the spacing waits")
	require.Zero(t, c.statuses.Len())
	require.Eventually(t, func() bool { return c.statuses.Len() == 1 }, 5*time.Second, 10*time.Millisecond, "and is queued for later")
	key2, _ := c.statuses.Get()
	c.statuses.Done(key2)
	require.Equal(t, key, key2)
	look(3, 0)
	require.Equal(t, int32(2), writes.Load(), "progress after the spacing is written")
	look(3, 1)
	require.Equal(t, int32(3), writes.Load(), "a failure is written at once")
}

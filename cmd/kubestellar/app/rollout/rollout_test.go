// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rollout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func TestTargetNamesTheForm(t *testing.T) {
	for _, arg := range []string{"shop", "/shop", "wds1/", "wds1/shop/x"} {
		_, _, _, err := target(&options{}, arg)
		require.ErrorContains(t, err, "name the placement as WDS/NAME", arg)
	}
	_, _, _, err := target(&options{}, "Not_A_Space/shop")
	require.ErrorContains(t, err, `"Not_A_Space/shop"`)
}

func TestDescribe(t *testing.T) {
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	var b strings.Builder
	require.False(t, describe(&b, "wds1", ep))
	require.Equal(t, "EdgePlacement wds1/shop: waiting for the server to start its rollout\n", b.String())

	ep.Status.Rollout = &edgev2alpha1.RolloutStatus{Revision: "r2", CompletedRevision: "r1", Phase: edgev2alpha1.RolloutPhasePaused,
		Message: "1 destinations failed, more than maxFailures (0): inv1/edge1", CurrentWave: "canary",
		Waves: []edgev2alpha1.RolloutWaveStatus{{Name: "canary", Destinations: 1, Updated: 1, Failed: 1}, {Name: "rest", Destinations: 3}},
		Destinations: []edgev2alpha1.RolloutDestination{{SyncTarget: "inv1/edge1", Wave: "canary", State: edgev2alpha1.RolloutStateFailed, Message: "not healthy"},
			{SyncTarget: "inv1/edge7", Wave: "rest", State: edgev2alpha1.RolloutStateHeld}}}
	b.Reset()
	require.False(t, describe(&b, "wds1", ep))
	require.Equal(t, `EdgePlacement wds1/shop: Paused, revision r2 (last complete: r1)
  1 destinations failed, more than maxFailures (0): inv1/edge1
> wave canary       1 destinations: 1 updated, 0 healthy, 1 failed, 0 waiting
  wave rest         3 destinations: 0 updated, 0 healthy, 0 failed, 0 waiting
  inv1/edge1 (wave canary): Failed: not healthy
  inv1/edge7 (wave rest): Held by edge
`, b.String())

	ep.Status.Rollout = &edgev2alpha1.RolloutStatus{Revision: "r2", CompletedRevision: "r2", Phase: edgev2alpha1.RolloutPhaseComplete}
	b.Reset()
	require.True(t, describe(&b, "wds1", ep))
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/storagetest"
)

// TestMailboxesBornReady: a mailbox space is stored Ready, with its URL
// and condition; any other space is stored as it came, for the space
// controller to set up.
func TestMailboxesBornReady(t *testing.T) {
	space := func(name, typ string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"type": typ}}}
		u.SetAPIVersion(tenancyv1alpha1.SchemeGroupVersion.String())
		u.SetKind("Space")
		u.SetName(name)
		u.SetGeneration(1)
		return u
	}
	for _, tc := range []struct {
		name, typ string
		ready     bool
	}{
		{"inv1-mb-0a1b2c3d-0000-4000-8000-000000000001", tenancyv1alpha1.SpaceTypeMailbox, true},
		{"wds1", tenancyv1alpha1.SpaceTypeWDS, false},
		{"inv1", tenancyv1alpha1.SpaceTypeInventory, false},
		{"team-a", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &storagetest.CreateRecorder{}
			s := MailboxesBornReady(rec)
			require.NoError(t, s.Create(context.Background(), "/k/"+tc.name, space(tc.name, tc.typ), &unstructured.Unstructured{}, 0))
			var sp tenancyv1alpha1.Space
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(rec.Created.Object, &sp))
			if !tc.ready {
				require.Empty(t, sp.Status.Phase, "a %q space is set up by the space controller", tc.typ)
				return
			}
			require.Equal(t, tenancyv1alpha1.SpacePhaseReady, sp.Status.Phase)
			require.Equal(t, URLPath(tc.name), sp.Status.URL)
			require.Len(t, sp.Status.Conditions, 1)
			c := sp.Status.Conditions[0]
			require.Equal(t, tenancyv1alpha1.SpaceConditionReady, c.Type)
			require.EqualValues(t, "True", c.Status)
			require.EqualValues(t, 1, c.ObservedGeneration)
			require.False(t, c.LastTransitionTime.IsZero())
		})
	}
}

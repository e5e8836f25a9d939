// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestRecordStore: the store of the SyncTargets' reflector keeps the
// dashboard's records and nothing else; a relist forgets what it lacks,
// by the space and name the record was made with.
func TestRecordStore(t *testing.T) {
	s := NewStore()
	ctx := context.Background()
	edges := newRecordStore(ctx, s, s.setEdge, s.deleteEdge)
	target := func(space, name, rv string) *unstructured.Unstructured {
		st := &edgev2alpha1.SyncTarget{}
		st.Name, st.ResourceVersion = name, rv
		st.Annotations = map[string]string{spaces.Annotation: space}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(st)
		require.NoError(t, err)
		return &unstructured.Unstructured{Object: obj}
	}
	edgeKeys := func() []string {
		s.mu.RLock()
		defer s.mu.RUnlock()
		var out []string
		for k := range s.edges {
			out = append(out, k)
		}
		return out
	}

	require.False(t, edges.HasSynced())
	require.NoError(t, edges.Add(target("inv1", "a", "3")))
	require.NoError(t, edges.Add(target("inv2", "a", "4")))
	require.NoError(t, edges.Update(target("inv1", "b", "5")))
	require.ElementsMatch(t, []string{key("inv1", "a"), key("inv2", "a"), key("inv1", "b")}, edgeKeys())
	require.Equal(t, "5", edges.LastStoreSyncResourceVersion())
	require.Empty(t, edges.List(), "no object is kept")

	require.NoError(t, edges.Delete(cache.DeletedFinalStateUnknown{Key: "k", Obj: target("inv1", "b", "6")}))
	require.ElementsMatch(t, []string{key("inv1", "a"), key("inv2", "a")}, edgeKeys())

	// A relist after the watch was down: inv2's a was deleted meanwhile,
	// inv3's c made.
	require.NoError(t, edges.Replace([]any{target("inv1", "a", "3"), target("inv3", "c", "9")}, "10"))
	require.ElementsMatch(t, []string{key("inv1", "a"), key("inv3", "c")}, edgeKeys())
	require.Equal(t, "10", edges.LastStoreSyncResourceVersion())
	require.True(t, edges.HasSynced())

	// A relist of nothing forgets every record.
	require.NoError(t, edges.Replace(nil, "11"))
	require.Empty(t, edgeKeys())
	require.Error(t, edges.Add("not an object"))
}

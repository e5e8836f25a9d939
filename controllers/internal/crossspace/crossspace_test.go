package crossspace

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

func TestSlicesTo(t *testing.T) {
	inf := &Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})}
	IndexSlicesByDestination(inf)
	slice := func(wds, name string, dests ...edgev2alpha1.SinglePlacement) *edgev2alpha1.SinglePlacementSlice {
		return &edgev2alpha1.SinglePlacementSlice{
			ObjectMeta:   metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.Annotation: wds}},
			Destinations: dests,
		}
	}
	// One slice names edge1 of inv1 twice (two Locations select it).
	a := slice("wds1", "a",
		edgev2alpha1.SinglePlacement{Space: "inv1", LocationName: "x", SyncTargetName: "edge1"},
		edgev2alpha1.SinglePlacement{Space: "inv1", LocationName: "y", SyncTargetName: "edge1"},
		edgev2alpha1.SinglePlacement{Space: "inv2", LocationName: "x", SyncTargetName: "edge1"})
	b := slice("wds2", "a", edgev2alpha1.SinglePlacement{Space: "inv1", LocationName: "x", SyncTargetName: "edge2"})
	require.NoError(t, inf.Add(a))
	require.NoError(t, inf.Add(b))
	require.NoError(t, inf.Add(&edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{spaces.Annotation: "wds3"}}}))

	require.Equal(t, []*edgev2alpha1.SinglePlacementSlice{a}, SlicesTo(inf, "inv1", "edge1"))
	require.Equal(t, []*edgev2alpha1.SinglePlacementSlice{a}, SlicesTo(inf, "inv2", "edge1"))
	require.Equal(t, []*edgev2alpha1.SinglePlacementSlice{b}, SlicesTo(inf, "inv1", "edge2"))
	require.Empty(t, SlicesTo(inf, "inv2", "edge2"))

	// A slice that no longer names a SyncTarget leaves its index.
	a2 := a.DeepCopy()
	a2.Destinations = a2.Destinations[2:]
	require.NoError(t, inf.Update(a2))
	require.Empty(t, SlicesTo(inf, "inv1", "edge1"))
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package delete

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/server/auth"
)

func object(gvr schema.GroupVersionResource, kind, name string, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

func madeFor(syncTarget string) (map[string]string, map[string]string) {
	return map[string]string{center.MadeByLabel: center.MadeBySyncTargetCreate}, map[string]string{center.SyncTargetAnnotation: syncTarget}
}

// fixture is a center with space inv1, and returns it and the ids of a
// token of edge1 and one of edge2.
func fixture(t *testing.T, objs ...runtime.Object) (*center.Center, string, string) {
	t.Helper()
	objs = append(objs, object(tenancyv1alpha1.SpacesGVR, "Space", "inv1", nil, nil))
	c := &center.Center{
		Root: k8sfake.NewClientset(),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			tenancyv1alpha1.SpacesGVR: "SpaceList", syncTargetsGVR: "SyncTargetList", locationsGVR: "LocationList"}, objs...),
	}
	var ids []string
	for _, st := range []string{"edge1", "edge2"} {
		_, info, err := auth.CreateToken(context.Background(), c.Root, auth.NewTokenOptions{InventorySpace: "inv1", SyncTarget: st, SyncTargetUID: types.UID("uid-" + st), CAPEM: []byte("ca")})
		require.NoError(t, err)
		ids = append(ids, info.ID)
	}
	return c, ids[0], ids[1]
}

func tokenIDs(t *testing.T, c *center.Center) []string {
	t.Helper()
	tokens, err := auth.ListTokens(context.Background(), c.Root)
	require.NoError(t, err)
	var ids []string
	for _, tok := range tokens {
		ids = append(ids, tok.ID)
	}
	return ids
}

func names(t *testing.T, c *center.Center, gvr schema.GroupVersionResource) []string {
	t.Helper()
	list, err := c.Dynamic.Resource(gvr).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, item := range list.Items {
		out = append(out, item.GetName())
	}
	return out
}

// TestDelete: the SyncTarget's tokens, the Locations this command's
// counterpart made for it, and the SyncTarget go; nothing else does.
func TestDelete(t *testing.T) {
	ourLabels, forEdge1 := madeFor("edge1")
	_, forEdge2 := madeFor("edge2")
	c, edge1Token, edge2Token := fixture(t,
		object(syncTargetsGVR, "SyncTarget", "edge1", nil, nil),
		object(syncTargetsGVR, "SyncTarget", "edge2", nil, nil),
		object(locationsGVR, "Location", "edge1", ourLabels, forEdge1),
		object(locationsGVR, "Location", "east", ourLabels, forEdge2),
		object(locationsGVR, "Location", "manual", nil, forEdge1),
	)
	var out, errOut bytes.Buffer
	err := runE(context.Background(), &options{inventorySpace: "inv1", timeout: time.Minute, connect: func(*clientconfig.Options) (*center.Center, error) { return c, nil }},
		"edge1", iostreams.IOStreams{Out: &out, ErrOut: &errOut})
	require.NoError(t, err)
	require.Equal(t, "SyncTarget \"edge1\" deleted from space \"inv1\"\n", out.String())
	require.Contains(t, errOut.String(), "revoked token(s) "+edge1Token+"\n")
	require.Contains(t, errOut.String(), "deleted Location \"edge1\"\n")
	require.Equal(t, []string{edge2Token}, tokenIDs(t, c))
	require.ElementsMatch(t, []string{"east", "manual"}, names(t, c, locationsGVR), "a Location made otherwise, or for another SyncTarget, stays")
	require.Equal(t, []string{"edge2"}, names(t, c, syncTargetsGVR))
}

func TestDeleteWhatIsLeft(t *testing.T) {
	ourLabels, forEdge1 := madeFor("edge1")
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		out  string
	}{
		{name: "only its Location is left", objs: []runtime.Object{object(locationsGVR, "Location", "edge1", ourLabels, forEdge1)},
			out: "SyncTarget \"edge1\" was already gone from space \"inv1\"\n"},
		{name: "nothing: its token is revoked, but no SyncTarget", out: "SyncTarget \"edge1\" was already gone from space \"inv1\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := fixture(t, tc.objs...)
			var out bytes.Buffer
			err := runE(context.Background(), &options{inventorySpace: "inv1", timeout: time.Minute, connect: func(*clientconfig.Options) (*center.Center, error) { return c, nil }},
				"edge1", iostreams.IOStreams{Out: &out, ErrOut: &bytes.Buffer{}})
			require.NoError(t, err)
			require.Equal(t, tc.out, out.String())
			require.Empty(t, names(t, c, locationsGVR))
		})
	}

	// No token, no Location, no SyncTarget: nothing to delete is an error.
	c, edge1Token, _ := fixture(t)
	require.NoError(t, auth.RevokeToken(context.Background(), c.Root, edge1Token))
	err := runE(context.Background(), &options{inventorySpace: "inv1", timeout: time.Minute, connect: func(*clientconfig.Options) (*center.Center, error) { return c, nil }},
		"edge1", iostreams.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	require.EqualError(t, err, `there is no SyncTarget "edge1" in space "inv1"`)
}

func TestDeleteErrors(t *testing.T) {
	noConnect := func(*clientconfig.Options) (*center.Center, error) { return nil, errors.New("connected") }
	for _, tc := range []struct {
		name, st, space string
		timeout         time.Duration
		stays           bool // the SyncTarget never goes
		connect         bool
		err             string
	}{
		{name: "bad name", st: "Edge_1", space: "inv1", err: `invalid SyncTarget name "Edge_1"`},
		{name: "no inventory space", st: "edge1", err: "--inventory-space is required: the space holding the SyncTarget"},
		{name: "no such space", st: "edge1", space: "inv2", connect: true, err: `--inventory-space: there is no space "inv2"`},
		{name: "bad space", st: "edge1", space: "Inv2", connect: true, err: "--inventory-space: "},
		{name: "never gone", st: "edge1", space: "inv1", connect: true, stays: true, timeout: 300 * time.Millisecond,
			err: `SyncTarget "edge1" is still being deleted after 300ms (see the server log)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := fixture(t, object(syncTargetsGVR, "SyncTarget", "edge1", nil, nil))
			if tc.stays {
				c.Dynamic.(*dynamicfake.FakeDynamicClient).PrependReactor("get", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, object(syncTargetsGVR, "SyncTarget", "edge1", nil, nil), nil
				})
			}
			connect := noConnect
			if tc.connect {
				connect = func(*clientconfig.Options) (*center.Center, error) { return c, nil }
			}
			err := runE(context.Background(), &options{inventorySpace: tc.space, timeout: tc.timeout, connect: connect},
				tc.st, iostreams.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
			require.ErrorContains(t, err, tc.err)
		})
	}
}

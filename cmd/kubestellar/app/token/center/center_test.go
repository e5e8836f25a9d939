// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package center

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/server/kubeconfig"
)

func TestNormalizeServerURL(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "https://center.example.com:6443", want: "https://center.example.com:6443"},
		{in: "https://center.example.com:6443/", want: "https://center.example.com:6443"},
		{in: "https://center.example.com:6443/spaces/wds1", want: "https://center.example.com:6443"},
		{in: "https://lb.example.com/ks/spaces/inv1/?x=1#frag", want: "https://lb.example.com/ks"},
		{in: "http://127.0.0.1:6443", want: "http://127.0.0.1:6443"},
		{in: "center.example.com:6443", err: `--server: "center.example.com:6443" is not a URL like https://HOST:PORT`},
		{in: "ftp://center.example.com", err: `--server: "ftp://center.example.com" is not a URL like https://HOST:PORT`},
		{in: "https:///path", err: `--server: "https:///path" is not a URL like https://HOST:PORT`},
		{in: "://", err: `--server: "://" is not a URL`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := NormalizeServerURL(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestServerURL(t *testing.T) {
	c := &Center{Loaded: &clientconfig.Loaded{BaseURL: "https://10.0.0.1:6443"}}
	got, err := c.ServerURL("")
	require.NoError(t, err)
	require.Equal(t, "https://10.0.0.1:6443", got, "the kubeconfig's server by default")
	got, err = c.ServerURL("https://center.example.com/spaces/x")
	require.NoError(t, err)
	require.Equal(t, "https://center.example.com", got)
	_, err = c.ServerURL("nonsense")
	require.ErrorContains(t, err, "--server")
}

func TestValidateTTL(t *testing.T) {
	require.NoError(t, ValidateTTL(0))
	require.NoError(t, ValidateTTL(time.Hour))
	require.EqualError(t, ValidateTTL(-time.Minute), "--ttl: -1m0s is negative (use 0 for a token that never expires)")
}

func TestDescribeExpiration(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		expiration time.Time
		want       string
	}{
		{name: "never", want: "never"},
		{name: "later", expiration: now.Add(time.Hour), want: "2026-01-02T04:04:05Z"},
		{name: "now", expiration: now, want: "2026-01-02T03:04:05Z (expired)"},
		{name: "earlier", expiration: now.Add(-time.Hour), want: "2026-01-02T02:04:05Z (expired)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, DescribeExpiration(auth.TokenInfo{Expiration: tc.expiration}, now))
		})
	}
}

func space(name string, phase tenancyv1alpha1.SpacePhase) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": tenancyv1alpha1.SchemeGroupVersion.String(), "kind": "Space",
		"metadata": map[string]any{"name": name},
		"status":   map[string]any{"phase": string(phase)},
	}}
}

func TestRequireSpace(t *testing.T) {
	newCenter := func(objs ...runtime.Object) *Center {
		return &Center{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{tenancyv1alpha1.SpacesGVR: "SpaceList"}, objs...)}
	}
	c := newCenter(space("inv1", tenancyv1alpha1.SpacePhaseReady), space("old", tenancyv1alpha1.SpacePhaseTerminating))
	for _, tc := range []struct {
		space, err string
	}{
		{space: "inv1"},
		{space: "root"},
		{space: "inv2", err: `--flag: there is no space "inv2" (create it with: kubestellar space create inv2 --type inventory)`},
		{space: "old", err: `--flag: space "old" is being deleted`},
		{space: "Bad_Name", err: "--flag: "},
	} {
		t.Run(tc.space, func(t *testing.T) {
			err := c.RequireSpace(context.Background(), "--flag", tc.space)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
		})
	}

	failing := newCenter()
	failing.Dynamic.(*dynamicfake.FakeDynamicClient).PrependReactor("get", "spaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(tenancyv1alpha1.SpacesGVR.GroupResource(), "inv1", errors.New("no"))
	})
	require.ErrorContains(t, failing.RequireSpace(context.Background(), "--inventory-space", "inv1"), `--inventory-space: looking up space "inv1": `)
}

// TestConnect builds the clients from a kubeconfig, without reaching the
// server, and fails naming the kubeconfig it could not read.
func TestConnect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kubeconfig.ForSpace("https://10.0.0.1:6443", "wds1", nil, "tok"), path))
	c, err := Connect(&clientconfig.Options{Kubeconfig: path})
	require.NoError(t, err)
	require.Equal(t, "https://10.0.0.1:6443", c.Loaded.BaseURL)
	require.NotNil(t, c.Root)
	require.NotNil(t, c.Dynamic)

	missing := filepath.Join(t.TempDir(), "none")
	_, err = Connect(&clientconfig.Options{Kubeconfig: missing})
	require.ErrorContains(t, err, "reading kubeconfig "+missing)
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/drivers"
	"github.com/k3s-io/kine/pkg/drivers/memory"
	"github.com/k3s-io/kine/pkg/server"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// newDatastore returns an etcd client whose calls go, in process, to
// kine's in-memory backend: the transactions kine accepts are the ones the
// server's datastore accepts.
func newDatastore(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wg := &sync.WaitGroup{}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	_, backend, err := memory.New(ctx, wg, &drivers.Config{})
	require.NoError(t, err)
	require.NoError(t, backend.Start(ctx))
	bridge := server.New(backend, "unix", 5*time.Second, "3.6.11")
	c := clientv3.NewCtxClient(ctx)
	c.KV = clientv3.NewKVFromKVClient(adapter.KvServerToKvClient(bridge), c)
	return c
}

// create stores keys as the API server creates objects.
func create(t *testing.T, c *clientv3.Client, keys ...string) {
	t.Helper()
	for _, key := range keys {
		txn, err := c.Txn(context.Background()).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "{}")).Commit()
		require.NoError(t, err)
		require.True(t, txn.Succeeded, key)
	}
}

// stored lists the keys under /registry/ but kine's own.
func stored(t *testing.T, c *clientv3.Client) []string {
	t.Helper()
	resp, err := c.Get(context.Background(), "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var keys []string
	for _, kv := range resp.Kvs {
		if string(kv.Key) == server.HealthKey {
			continue
		}
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// TestPurgeResourceIn: a CRD's instances go from its own space only; the
// same resource in other spaces (their own CRDs' instances, a space whose
// name extends this one's), other resources of the space and resources
// whose name extends this one's stay.
func TestPurgeResourceIn(t *testing.T) {
	c := newDatastore(t)
	create(t, c,
		"/registry/example.com/widgets/team-a/default/one",
		"/registry/example.com/widgets/team-a/prod/two",
		"/registry/example.com/widgets/team-a/cluster-scoped",
		"/registry/example.com/widgets/team-ab/default/one",
		"/registry/example.com/widgets/team-b/default/one",
		"/registry/example.com/widgets/root/default/one",
		"/registry/example.com/widgetsets/team-a/default/one",
		"/registry/example.com/gadgets/team-a/default/one",
		"/registry/other.example.com/widgets/team-a/default/one",
	)
	p := &Purger{Client: c, KeyPrefix: "/registry"}
	n, err := p.PurgeResourceIn(context.Background(), schema.GroupResource{Group: "example.com", Resource: "widgets"}, "team-a")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, []string{
		"/registry/example.com/gadgets/team-a/default/one",
		"/registry/example.com/widgets/root/default/one",
		"/registry/example.com/widgets/team-ab/default/one",
		"/registry/example.com/widgets/team-b/default/one",
		"/registry/example.com/widgetsets/team-a/default/one",
		"/registry/other.example.com/widgets/team-a/default/one",
	}, stored(t, c))

	n, err = p.PurgeResourceIn(context.Background(), schema.GroupResource{Group: "example.com", Resource: "widgets"}, "team-a")
	require.NoError(t, err)
	require.Zero(t, n, "nothing left the second time")
}

// TestPurgeResourceInPages: a space with more objects than one read holds
// is emptied in one call.
func TestPurgeResourceInPages(t *testing.T) {
	c := newDatastore(t)
	var keys []string
	for i := range pageSize + 7 {
		keys = append(keys, fmt.Sprintf("/registry/example.com/widgets/team-a/default/w%04d", i))
	}
	create(t, c, keys...)
	create(t, c, "/registry/example.com/widgets/team-b/default/w")
	p := &Purger{Client: c, KeyPrefix: "/registry"}
	n, err := p.PurgeResourceIn(context.Background(), schema.GroupResource{Group: "example.com", Resource: "widgets"}, "team-a")
	require.NoError(t, err)
	require.Equal(t, pageSize+7, n)
	require.Equal(t, []string{"/registry/example.com/widgets/team-b/default/w"}, stored(t, c))
}

// TestPurgeResourceInRefuses: a space name that would make a prefix of
// more than one space, and a built-in resource, delete nothing.
func TestPurgeResourceInRefuses(t *testing.T) {
	c := newDatastore(t)
	create(t, c, "/registry/example.com/widgets/team-a/default/one", "/registry/apps/deployments/team-a/default/one")
	p := &Purger{Client: c, KeyPrefix: "/registry", BuiltIn: func(gr schema.GroupResource) bool { return gr.Group == "apps" }}
	widgets := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	for _, space := range []string{"", Wildcard, "team-a/default"} {
		_, err := p.PurgeResourceIn(context.Background(), widgets, space)
		require.Error(t, err, "space %q", space)
	}
	_, err := p.PurgeResourceIn(context.Background(), schema.GroupResource{Group: "apps", Resource: "deployments"}, "team-a")
	require.ErrorContains(t, err, "built-in")
	require.Len(t, stored(t, c), 2)
}

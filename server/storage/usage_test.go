// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/spaces"
)

var (
	configMaps  = schema.GroupResource{Resource: "configmaps"}
	deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}
)

// create, update and remove write as the API server does on kine: in
// transactions conditioned on the key's revision.
func create(t *testing.T, cli *clientv3.Client, key string, size int) {
	t.Helper()
	resp, err := cli.Txn(t.Context()).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, strings.Repeat("x", size))).Commit()
	require.NoError(t, err)
	require.True(t, resp.Succeeded, "%s exists", key)
}

func update(t *testing.T, cli *clientv3.Client, key string, size int) {
	t.Helper()
	got, err := cli.Get(t.Context(), key)
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1, key)
	resp, err := cli.Txn(t.Context()).If(clientv3.Compare(clientv3.ModRevision(key), "=", got.Kvs[0].ModRevision)).Then(clientv3.OpPut(key, strings.Repeat("y", size))).Else(clientv3.OpGet(key)).Commit()
	require.NoError(t, err)
	require.True(t, resp.Succeeded, "%s changed meanwhile", key)
}

func remove(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	got, err := cli.Get(t.Context(), key)
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1, key)
	resp, err := cli.Txn(t.Context()).If(clientv3.Compare(clientv3.ModRevision(key), "=", got.Kvs[0].ModRevision)).Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
	require.NoError(t, err)
	require.True(t, resp.Succeeded, "%s changed meanwhile", key)
}

// eventually polls Of until it says objects and bytes.
func eventually(t *testing.T, u *Usage, space string, objects, bytes int64) {
	t.Helper()
	eventuallyCounts(t, "space "+space, func(ctx context.Context) (int64, int64, error) { return u.Of(ctx, space) }, objects, bytes)
}

// eventuallyCounts polls of until it says objects and bytes.
func eventuallyCounts(t *testing.T, what string, of func(context.Context) (int64, int64, error), objects, bytes int64) {
	t.Helper()
	var o, b int64
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		o, b, err = of(ctx)
		return err == nil && o == objects && b == bytes, nil
	})
	require.NoError(t, err, "%s: %d objects, %d bytes; want %d, %d", what, o, b, objects, bytes)
}

// TestUsage: a space's objects and bytes are counted when first asked
// about, with every resource of the space and nothing of other spaces;
// creates, updates and deletes after that are counted from the
// datastore's watch; a reservation counts until its write comes, or for
// reserveFor.
func TestUsage(t *testing.T) {
	ctx := t.Context()
	_, cli := startSQLite(t, ctx)
	cmA := Key(configMaps, "team-a", "default", "a")
	create(t, cli, cmA, 100)
	create(t, cli, Key(deployments, "team-a", "apps", "d"), 50)
	create(t, cli, Key(configMaps, "team-b", "default", "b"), 1000)
	create(t, cli, Key(configMaps, "team-ab", "default", "c"), 1000) // a space whose name starts with team-a's
	create(t, cli, Key(schema.GroupResource{Resource: "secrets"}, "team-a", "default", "s"), 7)
	u := NewUsage(func(string) ([]schema.GroupResource, error) {
		return []schema.GroupResource{configMaps, deployments}, nil
	})
	go u.Run(ctx, cli)

	objects, bytes, err := u.Of(ctx, "team-a")
	require.NoError(t, err)
	require.Equal(t, []int64{2, 150}, []int64{objects, bytes}, "team-a's ConfigMap and Deployment (Secrets are not among its resources here)")

	create(t, cli, Key(configMaps, "team-a", "default", "new"), 10)
	update(t, cli, cmA, 40)
	remove(t, cli, Key(deployments, "team-a", "apps", "d"))
	create(t, cli, Key(configMaps, "team-b", "default", "other"), 5000)
	eventually(t, u, "team-a", 2, 50)

	// A reservation counts at once, and gives way to its write.
	reserved := Key(configMaps, "team-a", "default", "reserved")
	_, _, ok, err := u.Admit(ctx, "team-a", reserved, 1, 900, 0, 0, false)
	require.NoError(t, err)
	require.True(t, ok)
	objects, bytes, err = u.Of(ctx, "team-a")
	require.NoError(t, err)
	require.Equal(t, []int64{3, 950}, []int64{objects, bytes})
	create(t, cli, reserved, 500)
	eventually(t, u, "team-a", 3, 550)

	// One never written lasts reserveFor.
	now := time.Now()
	u.mu.Lock()
	u.now = func() time.Time { return now }
	u.mu.Unlock()
	_, _, ok, err = u.Admit(ctx, "team-a", Key(configMaps, "team-a", "default", "never"), 1, 10, 0, 0, false)
	require.NoError(t, err)
	require.True(t, ok)
	eventually(t, u, "team-a", 4, 560)
	u.mu.Lock()
	u.now = func() time.Time { return now.Add(reserveFor + time.Second) }
	u.mu.Unlock()
	eventually(t, u, "team-a", 3, 550)

	// team-b, counted later, has its own.
	eventually(t, u, "team-b", 2, 6000)

	// Admit checks and reserves in one step: of 20 creates of 100 bytes at
	// once into 1,000 bytes of room, 10 fit, whatever their order.
	_, room, err := u.Of(ctx, "team-b")
	require.NoError(t, err)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, _, ok, err := u.Admit(ctx, "team-b", Key(configMaps, "team-b", "default", fmt.Sprint("burst-", i)), 1, 100, 0, room+1000, false)
			require.NoError(t, err)
			if ok {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(10), admitted.Load())
	_, _, ok, err = u.Admit(ctx, "team-b", Key(configMaps, "team-b", "default", "dry"), 1, 1, 0, room+1000, true)
	require.NoError(t, err)
	require.False(t, ok, "full")

	// A space gone is forgotten; asked about again, it is counted again.
	u.Retain(func(space string) bool { return space != "team-b" })
	u.mu.Lock()
	_, kept := u.spaces["team-a"]
	_, forgotten := u.spaces["team-b"]
	u.mu.Unlock()
	require.True(t, kept)
	require.False(t, forgotten)
	objects, _, err = u.Of(ctx, "team-b")
	require.NoError(t, err)
	require.Equal(t, int64(2), objects, "team-b's two ConfigMaps, read again (the burst was only reserved)")

	// Until the CRD cache can say what a space may store, it is not counted.
	unknown := NewUsage(func(string) ([]schema.GroupResource, error) { return nil, errors.New("not synced") })
	go unknown.Run(ctx, cli)
	_, _, err = unknown.Of(ctx, "team-a")
	require.ErrorContains(t, err, "not synced")
}

// TestUsageHeldEvents: the events that come while a space is first
// counted are applied after the count, those at or below the count's
// revision not again.
func TestUsageHeldEvents(t *testing.T) {
	u := NewUsage(nil)
	s := &spaceUsage{counted: make(chan struct{})}
	u.spaces["team-a"] = s
	put := func(key string, rev, created int64, size int, before int) *clientv3.Event {
		ev := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev, CreateRevision: created, Value: make([]byte, size)}}
		if before >= 0 {
			ev.PrevKv = &mvccpb.KeyValue{Key: []byte(key), Value: make([]byte, before)}
		}
		return ev
	}
	a, b := Key(configMaps, "team-a", "default", "a"), Key(configMaps, "team-a", "default", "b")
	u.mu.Lock()
	u.apply(put(a, 10, 10, 100, -1)) // in the count (rev 11)
	u.apply(put(b, 12, 12, 30, -1))  // after it
	u.apply(put(a, 13, 10, 60, 100)) // an update after it
	u.apply(&clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(Key(configMaps, "team-b", "default", "x")), ModRevision: 14}})
	u.mu.Unlock()
	require.Len(t, s.held, 3, "team-b's event is not team-a's")
	u.firstCount("team-a", s, 1, 100, 11, nil)
	require.Equal(t, []int64{2, 90}, []int64{s.objects, s.bytes})
	require.Empty(t, s.held)

	// An update whose size before is unknown has the space counted again.
	u.mu.Lock()
	u.apply(put(b, 15, 12, 50, -1))
	_, counted := u.spaces["team-a"]
	u.mu.Unlock()
	require.False(t, counted)
}

func TestSpaceOfKey(t *testing.T) {
	for key, want := range map[string]string{
		"/registry/core/configmaps/team-a/default/x":                 "team-a",
		"/registry/apps/deployments/inv-mb-1/ns/d":                   "inv-mb-1",
		"/registry/core/namespaces/team-a/default":                   "team-a",
		"/registry/apiextensions.k8s.io/customresourcedefinitions/x": "",
		"/other/core/configmaps/team-a/default/x":                    "",
		progressMarkerKey: "",
	} {
		got, ok := SpaceOfKey(key)
		require.Equal(t, want, got, key)
		require.Equal(t, want != "", ok, key)
	}
}

// TestUsageClientLeavesOutMailboxes: the watches of Usage's in-process
// client get no event of a mailbox, and every other.
func TestUsageClientLeavesOutMailboxes(t *testing.T) {
	ds, cli := startSQLite(t, t.Context())
	events := ds.UsageClient().Watch(t.Context(), KeyPrefix+"/", clientv3.WithPrefix())
	mailbox := Key(configMaps, "inv-mb-0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b6a", "default", "copy")
	tenant := Key(configMaps, "team-a", "default", "mine")
	// The watch is established once an event of it arrives: write until
	// one does, then a mailbox's copy and a tenant's object.
	var got []string
	deadline := time.After(10 * time.Second)
	for i := 0; len(got) == 0; i++ {
		create(t, cli, Key(configMaps, "team-a", "default", "warm-"+strings.Repeat("x", i)), 1)
		select {
		case r := <-events:
			for _, ev := range r.Events {
				got = append(got, string(ev.Kv.Key))
			}
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the usage client's watch saw nothing")
		}
	}
	create(t, cli, mailbox, 10)
	create(t, cli, tenant, 10)
	next := func(want string, skip string) {
		t.Helper()
		for {
			select {
			case r := <-events:
				for _, ev := range r.Events {
					key := string(ev.Kv.Key)
					require.NotEqual(t, skip, key, "a mailbox's event")
					if key == want {
						return
					}
				}
			case <-deadline:
				t.Fatalf("%s never came", want)
			}
		}
	}
	next(tenant, mailbox)

	// Once mailboxes are counted, their events come.
	ds.CountMailboxes()
	later := Key(configMaps, "inv-mb-0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b6a", "default", "later")
	create(t, cli, later, 10)
	next(later, "")
}

// TestUsageMailboxes: the mailboxes of an inventory space are counted
// together, from their keys (one range per resource, as their names
// begin alike) and then from the watch; a mailbox of another inventory
// whose shortened name begins alike is not counted with them, nor one
// of no known inventory. The watch is asked for mailbox events before
// the first count.
func TestUsageMailboxes(t *testing.T) {
	ctx := t.Context()
	_, cli := startSQLite(t, ctx)
	const (
		uid1 = "0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b61"
		uid2 = "0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b62"
		uid3 = "0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b63"
	)
	// Inventory names longer than 22 characters are shortened in their
	// mailboxes' names: two inventories can share the beginning.
	inv, other := "fleet-of-the-north-region-a", "fleet-of-the-north-region-b"
	mb1, mb2, mbOther := spaces.MailboxName(inv, uid1), spaces.MailboxName(inv, uid2), spaces.MailboxName(other, uid3)
	require.Equal(t, strings.TrimSuffix(mb1, uid1), strings.TrimSuffix(mbOther, uid3), "the test needs names that begin alike")
	inventories := map[string]string{mb1: inv, mb2: inv, mbOther: other}
	create(t, cli, Key(configMaps, mb1, "default", "a"), 100)
	create(t, cli, Key(deployments, mb2, "apps", "d"), 50)
	create(t, cli, Key(configMaps, mbOther, "default", "b"), 1000)
	create(t, cli, Key(configMaps, inv, "default", "own"), 7) // the inventory's own, counted apart
	var asked atomic.Int32
	u := NewUsage(func(string) ([]schema.GroupResource, error) { return []schema.GroupResource{configMaps}, nil })
	var inventoriesMu sync.Mutex
	u.InventoryOf = func(mailbox string) (string, bool) {
		inventoriesMu.Lock()
		defer inventoriesMu.Unlock()
		i, ok := inventories[mailbox]
		return i, ok
	}
	u.MailboxResources = func(string) ([]schema.GroupResource, error) {
		return []schema.GroupResource{configMaps, deployments}, nil
	}
	u.MailboxEvents = func() { asked.Add(1) }
	go u.Run(ctx, cli)

	objects, bytes, err := u.OfMailboxes(ctx, inv)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 150}, []int64{objects, bytes})
	require.Equal(t, int32(1), asked.Load())
	objects, bytes, err = u.Of(ctx, inv)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 7}, []int64{objects, bytes}, "the space itself")

	create(t, cli, Key(configMaps, mb2, "default", "new"), 10)
	create(t, cli, Key(configMaps, mbOther, "default", "new"), 10)
	create(t, cli, Key(configMaps, spaces.MailboxName(inv, "0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b69"), "default", "unknown"), 10)
	remove(t, cli, Key(configMaps, mb1, "default", "a"))
	eventuallyMailboxes(t, u, inv, 2, 60)

	_, _, ok, err := u.AdmitMailbox(ctx, inv, Key(configMaps, mb1, "default", "more"), 1, 10, 2, 0, false)
	require.NoError(t, err)
	require.False(t, ok, "2 objects held, at most 2")
	objects, bytes, err = u.OfMailboxes(ctx, other)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1010}, []int64{objects, bytes})

	// A mailbox's Space may leave the cache before the deletes of its
	// objects come: they still count where the creates did.
	inventoriesMu.Lock()
	delete(inventories, mb2)
	inventoriesMu.Unlock()
	remove(t, cli, Key(deployments, mb2, "apps", "d"))
	eventuallyMailboxes(t, u, inv, 1, 10)

	// A count that went wrong (an event missed) heals: after recountAfter
	// the mailboxes are read again.
	u.mu.Lock()
	u.spaces[inv+mailboxesSuffix].objects += 5
	u.mu.Unlock()
	eventuallyMailboxes(t, u, inv, 6, 10)
	now := time.Now()
	u.mu.Lock()
	u.now = func() time.Time { return now.Add(recountAfter + time.Second) }
	u.mu.Unlock()
	eventuallyMailboxes(t, u, inv, 1, 10)
}

// TestUsagePerResource: a resource PerResource names is also counted
// apart in each space, from its keys and then from the watch.
func TestUsagePerResource(t *testing.T) {
	ctx := t.Context()
	_, cli := startSQLite(t, ctx)
	syncTargets := schema.GroupResource{Group: "edge.kubestellar.io", Resource: "synctargets"}
	create(t, cli, Key(syncTargets, "inv", "", "edge1"), 10)
	create(t, cli, Key(syncTargets, "inv-b", "", "edge1"), 10)
	create(t, cli, Key(configMaps, "inv", "default", "cm"), 100)
	u := NewUsage(func(string) ([]schema.GroupResource, error) {
		return []schema.GroupResource{configMaps, syncTargets}, nil
	})
	u.PerResource = map[string]schema.GroupResource{"synctargets": syncTargets}
	go u.Run(ctx, cli)
	objects, _, err := u.OfResource(ctx, "inv", "synctargets")
	require.NoError(t, err)
	require.Equal(t, int64(1), objects)
	objects, _, err = u.Of(ctx, "inv")
	require.NoError(t, err)
	require.Equal(t, int64(2), objects, "the space counts them too")
	create(t, cli, Key(syncTargets, "inv", "", "edge2"), 10)
	create(t, cli, Key(syncTargets, "inv-b", "", "edge2"), 10)
	create(t, cli, Key(configMaps, "inv", "default", "cm2"), 100)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		objects, _, err = u.OfResource(ctx, "inv", "synctargets")
		return err == nil && objects == 2, nil
	})
	require.NoError(t, err, "SyncTargets of inv: %d, want 2", objects)
	_, _, err = u.OfResource(ctx, "inv", "locations")
	require.ErrorContains(t, err, "not counted apart")
}

func eventuallyMailboxes(t *testing.T, u *Usage, inventory string, objects, bytes int64) {
	t.Helper()
	eventuallyCounts(t, "mailboxes of "+inventory, func(ctx context.Context) (int64, int64, error) { return u.OfMailboxes(ctx, inventory) }, objects, bytes)
}

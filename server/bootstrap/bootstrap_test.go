// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package bootstrap

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubestellar/kubestellar/server/storage"
)

func TestSealOpen(t *testing.T) {
	id := Identity{CACert: []byte("cert"), CAKey: []byte("key"), AdminToken: "admin"}
	data, err := Seal(id, "secret")
	require.NoError(t, err)
	require.NotContains(t, string(data), "admin", "the identity is encrypted")
	got, err := Open(data, "secret")
	require.NoError(t, err)
	require.Equal(t, id, got)
	_, err = Open(data, "another")
	require.ErrorIs(t, err, ErrWrongToken)
	_, err = Open([]byte("{}"), "secret")
	require.ErrorContains(t, err, "not one this version reads")
	_, err = Seal(id, "")
	require.Error(t, err)
}

// TestSyncAgainstKine: servers starting at once on one (real) datastore
// end up with one identity; another token is refused.
func TestSyncAgainstKine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	ds, err := storage.Start(ctx, storage.Config{DataDir: dir})
	require.NoError(t, err)
	defer ds.Stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: ds.Endpoints, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer cli.Close()

	var wg sync.WaitGroup
	ids := make([]Identity, 4)
	created := make([]bool, 4)
	errs := make([]error, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], created[i], errs[i] = Sync(ctx, cli, "secret", func() (Identity, error) {
				return Identity{AdminToken: filepath.Base(t.TempDir())}, nil
			})
		}()
	}
	wg.Wait()
	n := 0
	for i := range ids {
		require.NoError(t, errs[i])
		require.Equal(t, ids[0], ids[i], "every server has the same identity")
		if created[i] {
			n++
		}
	}
	require.Equal(t, 1, n, "exactly one server stored its identity")

	_, _, err = Sync(ctx, cli, "wrong", func() (Identity, error) { return Identity{AdminToken: "x"}, nil })
	require.ErrorIs(t, err, ErrWrongToken)
}

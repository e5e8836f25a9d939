// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
)

// The storages on an etcd cluster share a client per transport
// configuration, closed with the last storage on it or when the datastore
// stops. The cluster here is kine's socket, which serves the etcd API as
// etcd does, so that the test needs no etcd (the etcdtest package tests
// the storage on one).
func TestEtcdClientsSharedPerTransport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds := startSQLiteIn(ctx, t, t.TempDir())
	build := func(servers ...string) (apiserverstorage.Interface, factory.DestroyFunc, error) {
		cfg := configMapConfig(ds)
		if servers != nil {
			cfg.Transport.ServerList = servers
		}
		return ds.etcdStorage(cfg, func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} }, "/core/configmaps")
	}
	must := func(s apiserverstorage.Interface, destroy factory.DestroyFunc, err error) (apiserverstorage.Interface, factory.DestroyFunc) {
		t.Helper()
		require.NoError(t, err)
		return s, destroy
	}

	one, destroyOne := must(build())
	require.Equal(t, 1, ds.etcdClients.open())
	two, destroyTwo := must(build())
	require.Equal(t, 1, ds.etcdClients.open(), "the storages on one transport share a client")
	socket := ds.Endpoints[0]
	_, destroyOther := must(build(socket, socket))
	require.Equal(t, 2, ds.etcdClients.open(), "another transport has a client of its own")
	destroyOther()
	destroyOther()
	require.Equal(t, 1, ds.etcdClients.open(), "a client is closed with the last storage on it, however often it is destroyed")

	require.NoError(t, one.Create(ctx, "/core/configmaps/wds1/default/a", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}}, nil, 0))
	require.NoError(t, two.Get(ctx, "/core/configmaps/wds1/default/a", apiserverstorage.GetOptions{}, &corev1.ConfigMap{}))
	destroyOne()
	require.Equal(t, 1, ds.etcdClients.open())
	destroyTwo()
	require.Equal(t, 0, ds.etcdClients.open())

	_, destroyLast := must(build())
	require.Equal(t, 1, ds.etcdClients.open())
	ds.Stop()
	require.Equal(t, 0, ds.etcdClients.open(), "the datastore's clients are closed when it stops")
	destroyLast()
	_, _, err := build()
	require.ErrorIs(t, err, errStopped, "no storage is built once the datastore stopped")
}

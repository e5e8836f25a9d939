// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	apiserverstorage "k8s.io/apiserver/pkg/storage"

	"github.com/kubestellar/kubestellar/spaces"
)

// TestListThenWatchMissesNoCreate lists an empty namespace on kine over
// SQLite, as an informer does (resource version 0), while an object is
// created there, then watches from the list's revision: the object must be
// in the list or in the watch. kine answers an empty list with a revision
// read after it, so a create committed between the two was in neither
// unless the space storage corrects the revision; each round is a fresh
// namespace racing one create.
func TestListThenWatchMissesNoCreate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store := spaces.Decorate(configMapStorage(t, startSQLiteIn(ctx, t, t.TempDir())), "/core/configmaps")
	inSpace := spaces.WithSpace(ctx, "s1")

	const rounds = 300
	missed := 0
	for i := range rounds {
		ns := fmt.Sprintf("ns-%d", i)
		created := make(chan error, 1)
		start := make(chan struct{})
		go func() {
			<-start
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}
			created <- store.Create(inSpace, "/core/configmaps/"+ns+"/x", cm, nil, 0)
		}()
		close(start)
		list := &corev1.ConfigMapList{}
		require.NoError(t, store.GetList(inSpace, "/core/configmaps/"+ns, apiserverstorage.ListOptions{
			ResourceVersion: "0", Recursive: true, Predicate: apiserverstorage.Everything}, list))
		require.NoError(t, <-created)
		if len(list.Items) == 1 {
			continue
		}
		w, err := store.Watch(inSpace, "/core/configmaps/"+ns, apiserverstorage.ListOptions{
			ResourceVersion: list.ResourceVersion, Recursive: true, Predicate: apiserverstorage.Everything})
		require.NoError(t, err)
		select {
		case ev := <-w.ResultChan():
			require.Equal(t, watch.Added, ev.Type, "round %d: %+v", i, ev.Object)
		case <-time.After(2 * time.Second):
			missed++
		}
		w.Stop()
	}
	require.Zero(t, missed, "of %d creates, %d were in neither the list nor the watch from its revision", rounds, missed)
}

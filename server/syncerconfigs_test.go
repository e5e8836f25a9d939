// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestSyncerConfigCache: the cache keeps a SyncerConfig's upsync clauses,
// under the key of the whole object, and SyncerConfigOf answers from it;
// one that does not convert is reported, not dropped.
func TestSyncerConfigCache(t *testing.T) {
	upsync := []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"configmaps"}, Namespaces: []string{"edge"}}}
	whole := &edgev2alpha1.SyncerConfig{
		ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName, ResourceVersion: "4", UID: "u",
			Annotations: map[string]string{spaces.Annotation: "mb1", "other": "x"}, Labels: map[string]string{"l": "v"}},
		Spec: edgev2alpha1.SyncerConfigSpec{Namespaces: []string{"a", "b"}, Resources: []edgev2alpha1.SyncedResource{{Resource: "configmaps", Version: "v1"}},
			Upsync: upsync},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(whole)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: content}
	broken := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": edgev2alpha1.SyncerConfigName,
		"annotations": map[string]any{spaces.Annotation: "mb2"}}, "spec": map[string]any{"upsync": "not a list"}}}

	indexer := cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})
	for _, obj := range []*unstructured.Unstructured{u, broken} {
		kept, err := upsyncOnly(obj)
		require.NoError(t, err)
		want, err := spaces.KeyFunc(obj)
		require.NoError(t, err)
		key, err := spaces.KeyFunc(kept)
		require.NoError(t, err)
		require.Equal(t, want, key)
		require.NoError(t, indexer.Add(kept))
	}
	c := &syncerConfigCache{}
	c.indexer.Store(&indexerBox{indexer})

	cfg, found, err := c.SyncerConfigOf("mb1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, upsync, cfg.Spec.Upsync)
	require.Empty(t, cfg.Spec.Namespaces, "only the upsync clauses are kept")
	require.Empty(t, cfg.Labels)

	_, _, err = c.SyncerConfigOf("mb2")
	require.ErrorContains(t, err, `SyncerConfig of mailbox "mb2"`)

	_, found, err = c.SyncerConfigOf("mb3")
	require.NoError(t, err)
	require.False(t, found)
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/server"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
)

// TestWithoutRemainingCount: a list marked WithoutRemainingCount still
// gets every object once, a page at a time, without kine counting what
// follows each page; an unmarked one gets the exact remainingItemCount.
func TestWithoutRemainingCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds := startSQLiteIn(ctx, t, t.TempDir())
	store := configMapStorage(t, ds)
	const objects, page = 25, 10
	for i := range objects {
		name := fmt.Sprintf("cm-%02d", i)
		require.NoError(t, store.Create(ctx, "/core/configmaps/default/"+name,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, nil, 0))
	}
	list := func(ctx context.Context) (names []string, firstRemaining *int64) {
		continueToken := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, objects, "the pages end")
			pred := apiserverstorage.Everything
			pred.Limit, pred.Continue = page, continueToken
			var out corev1.ConfigMapList
			require.NoError(t, store.GetList(ctx, "/core/configmaps/default/", apiserverstorage.ListOptions{Recursive: true, Predicate: pred}, &out))
			if pages == 0 {
				firstRemaining = out.RemainingItemCount
			}
			for _, cm := range out.Items {
				names = append(names, cm.Name)
			}
			if continueToken = out.Continue; continueToken == "" {
				return names, firstRemaining
			}
		}
	}
	all, remaining := list(ctx)
	require.Len(t, all, objects)
	require.NotNil(t, remaining)
	require.Equal(t, int64(objects-page), *remaining, "an unmarked list counts what remains")

	uncounted, remaining := list(WithoutRemainingCount(ctx))
	require.Equal(t, all, uncounted, "a marked list gets every object once, in order")
	// The mark reached kine through the in-process client: the count is
	// the one uncountedPages gives, not kine's.
	require.NotNil(t, remaining)
	require.Equal(t, int64(math.MaxInt32-page), *remaining)
}

// countingBackend counts the counts it is asked for.
type countingBackend struct {
	server.Backend
	counts int
}

func (b *countingBackend) Count(context.Context, string, string, int64) (int64, int64, error) {
	b.counts++
	return 7, 3, nil
}

func (b *countingBackend) CurrentRevision(context.Context) (int64, error) { return 9, nil }

func TestUncountedPagesCount(t *testing.T) {
	ctx := context.Background()
	inner := &countingBackend{}
	b := uncountedPages{inner}

	rev, n, err := b.Count(ctx, "/a/", "/a0", 5)
	require.NoError(t, err)
	require.Equal(t, [2]int64{7, 3}, [2]int64{rev, n}, "unmarked: kine's count")
	require.Equal(t, 1, inner.counts)

	rev, n, err = b.Count(WithoutRemainingCount(ctx), "/a/", "/a0", 5)
	require.NoError(t, err)
	require.Equal(t, [2]int64{5, math.MaxInt32}, [2]int64{rev, n}, "marked: the list's revision, and more than any page")
	rev, _, err = b.Count(WithoutRemainingCount(ctx), "/a/", "/a0", 0)
	require.NoError(t, err)
	require.Equal(t, int64(9), rev, "marked, no revision: the current one")
	require.Equal(t, 1, inner.counts, "marked: not counted")
}

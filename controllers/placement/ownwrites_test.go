// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestOwnUpdateIsNoNews: the event of the translator's own update of a
// copy enqueues nothing; an update of the copy by anyone else (another
// content hash), or a second event after the own one was taken, does.
func TestOwnUpdateIsNoNews(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	const uid = "0a1b2c3d-0000-4000-8000-000000000001"
	mailbox := spaces.MailboxName("inv1", uid)
	targets := &crossspace.Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{})}
	crossspace.IndexSyncTargetsByMailbox(targets)
	require.NoError(t, targets.Add(&edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge1", UID: uid,
		Annotations: map[string]string{spaces.Annotation: "inv1"}}, Status: edgev2alpha1.SyncTargetStatus{MailboxSpace: mailbox}}))
	c := &Controller{syncTargets: targets, own: newOwnWrites(),
		mailboxes: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	t.Cleanup(c.mailboxes.ShutDown)
	// The shared caches' handlers get a copy's record (crossspace.Copy),
	// not the object.
	copyOf := func(rv, hash string) *crossspace.Copy {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace("shop")
		u.SetName("web")
		u.SetResourceVersion(rv)
		u.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
		u.SetAnnotations(map[string]string{spaces.Annotation: mailbox, ContentHashAnnotation: hash,
			edgev2alpha1.SourceSpaceAnnotation: "wds1", edgev2alpha1.SourcePlacementAnnotation: "p"})
		return crossspace.Record(u)
	}
	events := c.resourceEvents(gvr)

	c.own.writing(gvr, mailbox, "shop", "web", "h2")
	events.UpdateFunc(copyOf("1", "h1"), copyOf("2", "h2"))
	require.Zero(t, c.mailboxes.Len(), "the translator's own update")

	events.UpdateFunc(copyOf("2", "h2"), copyOf("3", "h3"))
	require.Equal(t, 1, c.mailboxes.Len(), "someone else's update")
	key, _ := c.mailboxes.Get()
	c.mailboxes.Done(key)
	require.Equal(t, spaces.Key("inv1", "", "edge1"), key)

	// A write that failed is forgotten: the same hash from anyone else
	// is news.
	c.own.writing(gvr, mailbox, "shop", "web", "h4")
	c.own.forget(gvr, mailbox, "shop", "web")
	events.UpdateFunc(copyOf("3", "h3"), copyOf("4", "h4"))
	require.Equal(t, 1, c.mailboxes.Len(), "an update after a failed write")
}

// TestOwnWritesForgotten: a write whose event never comes (its cache
// listed again) is forgotten after ownWriteLifetime, at the next write.
func TestOwnWritesForgotten(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	o := newOwnWrites()
	now := time.Unix(1000, 0)
	o.now = func() time.Time { return now }
	o.writing(gvr, "mb", "shop", "a", "h1")
	now = now.Add(ownWriteLifetime + time.Second)
	o.writing(gvr, "mb", "shop", "b", "h1")
	require.Len(t, o.m, 1)
	_, kept := o.m[ownWrite{gvr, spaces.Key("mb", "shop", "b")}]
	require.True(t, kept)
}

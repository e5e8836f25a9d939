// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestWatchCacheServesSpacesButNotMailboxes checks the space-aware watch
// cache from the outside: lists and watches in a space come from it and
// see every write before them; a mailbox's copies never enter it, and
// lists in a mailbox or the wildcard space still see everything.
func TestWatchCacheServesSpacesButNotMailboxes(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	// The caches leave the mailboxes out: the apiserver's periodic check of
	// a cache against the datastore would read every mailbox copy to drop
	// it, so the server turns it off (server/config.go).
	require.False(t, utilfeature.DefaultFeatureGate.Enabled(genericfeatures.DetectCacheInconsistency),
		"the watch caches' consistency check is on")
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	mailbox := prodEdge(t, c)
	require.True(t, spaces.IsMailboxName(mailbox), "mailbox %q", mailbox)
	wds, mb, all := kube(t, s, "wds1"), kube(t, s, mailbox), kube(t, s, spaces.Wildcard)
	metrics := func() string {
		body, err := kube(t, s, spaces.Root).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		require.NoError(t, err)
		return string(body)
	}
	const received, lists = "apiserver_watch_cache_events_received_total", "apiserver_cache_list_total"
	configMaps := []string{`group=""`, `resource="configmaps"`}
	cacheLists := configMaps
	copies := func() int {
		got, err := mb.CoreV1().ConfigMaps("placed").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(got.Items)
	}

	// 20 ConfigMaps in the WDS, then a placement that copies them into
	// the mailbox.
	_, err := wds.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "placed"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range 20 {
		_, err := wds.CoreV1().ConfigMaps("placed").Create(ctx, configMap("placed", fmt.Sprintf("cm-%02d", i), "wds"), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	eventually(t, 30*time.Second, func() (bool, error) {
		return metricSum(t, metrics(), received, configMaps...) >= 20, nil
	}, "the WDS's ConfigMaps to reach the watch cache")
	defaultsSettled(t, s)
	before := metricSum(t, metrics(), received, configMaps...)
	core := ""
	require.NoError(t, c.Create(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "placed"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Downsync: []edgev2alpha1.DownsyncClause{
			{APIGroup: &core, Resources: []string{"namespaces"}, ObjectNames: []string{"placed"}},
			{APIGroup: &core, Resources: []string{"configmaps"}, Namespaces: []string{"placed"}},
		}}}))
	eventually(t, time.Minute, func() (bool, error) { return copies() == 20, nil }, "the 20 copies in the mailbox")

	// The copies reached no cache: a write in the WDS after them does, and
	// only it.
	_, err = wds.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "marker", "wds"), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() (bool, error) {
		return metricSum(t, metrics(), received, configMaps...) >= before+1, nil
	}, "the WDS write to reach the watch cache")
	require.Equal(t, before+1, metricSum(t, metrics(), received, configMaps...), "the watch cache received the mailbox's copies")

	// A list in the WDS is served by the cache; a list in the mailbox and
	// one across all spaces by the datastore, and they see the copies.
	listed := metricSum(t, metrics(), lists, cacheLists...)
	require.Equal(t, 20, copies())
	got, err := all.CoreV1().ConfigMaps("").List(ctx, written)
	require.NoError(t, err)
	require.Len(t, got.Items, 20+20+1)
	require.Equal(t, listed, metricSum(t, metrics(), lists, cacheLists...), "a list in a mailbox or the wildcard space came from the cache")
	got, err = wds.CoreV1().ConfigMaps("default").List(ctx, written)
	require.NoError(t, err)
	require.Equal(t, []string{"marker"}, names(got.Items))
	require.Equal(t, listed+1, metricSum(t, metrics(), lists, cacheLists...), "the list in the WDS did not come from the cache")

	// Every list in the WDS sees the writes before it, while the
	// placement copies them into the mailbox.
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("cm-%02d", i))
	}
	for i := range 30 {
		name := fmt.Sprintf("more-%02d", i)
		_, err = wds.CoreV1().ConfigMaps("placed").Create(ctx, configMap("placed", name, "wds"), metav1.CreateOptions{})
		require.NoError(t, err)
		want = append(want, name)
		got, err := wds.CoreV1().ConfigMaps("placed").List(ctx, written)
		require.NoError(t, err)
		require.ElementsMatch(t, want, names(got.Items), "list %d in the WDS", i)
	}
	eventually(t, time.Minute, func() (bool, error) { return copies() == 50, nil }, "the 50 copies in the mailbox")

	// A watch from a list's resource version sees the next write in its
	// namespace, and nothing of the others' or the mailbox's.
	got, err = wds.CoreV1().ConfigMaps("default").List(ctx, written)
	require.NoError(t, err)
	w, err := wds.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: written.FieldSelector, ResourceVersion: got.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	_, err = wds.CoreV1().ConfigMaps("placed").Create(ctx, configMap("placed", "elsewhere", "wds"), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, func() (bool, error) { return copies() == 51, nil }, "the copy of the last one in the mailbox")
	_, err = wds.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "after", "wds"), metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case ev := <-w.ResultChan():
		require.Equal(t, watch.Added, ev.Type)
		cm := ev.Object.(*corev1.ConfigMap)
		require.Equal(t, "after", cm.Name, "the WDS's watch delivered %s/%s of space %s", cm.Namespace, cm.Name, cm.Annotations[spaces.Annotation])
	case <-time.After(10 * time.Second):
		t.Fatal("the WDS's watch saw no event")
	}
}

// TestWildcardListsFromTheCacheUntilAMailboxHoldsOne: a list across all
// spaces comes from the watch cache while no mailbox has held an object of
// the resource (SyncTargets never, Services until one is placed), and from
// the datastore once one has, with the mailbox's copy in it.
func TestWildcardListsFromTheCacheUntilAMailboxHoldsOne(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	mailbox := prodEdge(t, c)
	wds, all := kube(t, s, "wds1"), kube(t, s, spaces.Wildcard)
	listsFromCache := func(labels ...string) float64 {
		body, err := kube(t, s, spaces.Root).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		require.NoError(t, err)
		return metricSum(t, string(body), "apiserver_cache_list_total", labels...)
	}
	syncTargets := []string{`group="edge.kubestellar.io"`, `resource="synctargets"`}
	services := []string{`group=""`, `resource="services"`}

	before := listsFromCache(syncTargets...)
	targets := &edgev2alpha1.SyncTargetList{}
	require.NoError(t, c.List(in(spaces.Wildcard), targets))
	require.Len(t, targets.Items, 1)
	require.Equal(t, "edge1", targets.Items[0].Name)
	require.Equal(t, before+1, listsFromCache(syncTargets...), "the SyncTargets of all spaces came from the datastore")

	_, err := wds.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "placed"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	_, err = wds.CoreV1().Services("placed").Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	before = listsFromCache(services...)
	got, err := all.CoreV1().Services("").List(ctx, written)
	require.NoError(t, err)
	require.Len(t, got.Items, 1)
	require.Equal(t, "wds1", got.Items[0].Annotations[spaces.Annotation])
	require.Equal(t, before+1, listsFromCache(services...), "the Services of all spaces came from the datastore")

	core := ""
	require.NoError(t, c.Create(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Downsync: []edgev2alpha1.DownsyncClause{
			{APIGroup: &core, Resources: []string{"namespaces"}, ObjectNames: []string{"placed"}},
			{APIGroup: &core, Resources: []string{"services"}, Namespaces: []string{"placed"}},
		}}}))
	mb := kube(t, s, mailbox)
	eventually(t, time.Minute, func() (bool, error) {
		_, err := mb.CoreV1().Services("placed").Get(ctx, "web", metav1.GetOptions{})
		return err == nil, nil
	}, "the Service's copy in the mailbox")
	before = listsFromCache(services...)
	got, err = all.CoreV1().Services("").List(ctx, written)
	require.NoError(t, err)
	var where []string
	for _, svc := range got.Items {
		where = append(where, svc.Annotations[spaces.Annotation]+"/"+svc.Namespace+"/"+svc.Name)
	}
	require.ElementsMatch(t, []string{"wds1/placed/web", mailbox + "/placed/web"}, where)
	require.Equal(t, before, listsFromCache(services...), "the Services of all spaces, a mailbox's among them, came from the cache")
}

// prodEdge makes SyncTarget edge1 in inv1 with a Location labelled
// env=prod, and returns its mailbox once Ready.
func prodEdge(t *testing.T, c client.Client) string {
	t.Helper()
	require.NoError(t, c.Create(in("inv1"), &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge1", Labels: map[string]string{"name": "edge1"}}}))
	require.NoError(t, c.Create(in("inv1"), &edgev2alpha1.Location{
		ObjectMeta: metav1.ObjectMeta{Name: "edge1", Labels: map[string]string{"env": "prod"}},
		Spec: edgev2alpha1.LocationSpec{
			Resource:         edgev2alpha1.GroupVersionResource{Group: edgev2alpha1.GroupName, Version: "v2alpha1", Resource: "synctargets"},
			InstanceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "edge1"}},
		},
	}))
	return readyMailbox(t, c, "inv1", "edge1")
}

// readyMailbox waits for a SyncTarget's mailbox space to be Ready and
// returns its name.
func readyMailbox(t *testing.T, c client.Client, inv, syncTarget string) string {
	t.Helper()
	mailbox := mailboxOf(t, c, inv, syncTarget)
	eventually(t, 30*time.Second, func() (bool, error) {
		sp := &tenancyv1alpha1.Space{}
		err := c.Get(in(spaces.Root), client.ObjectKey{Name: mailbox}, sp)
		return err == nil && sp.Status.Phase == tenancyv1alpha1.SpacePhaseReady, err
	}, "mailbox %s to be ready", mailbox)
	return mailbox
}

func names(items []corev1.ConfigMap) []string {
	var out []string
	for _, cm := range items {
		out = append(out, cm.Name)
	}
	return out
}

// metricSum adds up the series of a metric, in the Prometheus text format,
// whose labels include every one of labels.
func metricSum(t *testing.T, body, metric string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for _, value := range seriesValues(body, metric, labels...) {
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, "%s %s", metric, value)
		sum += v
	}
	return sum
}

// TestForgedSpaceAnnotationStaysInItsSpace: the watch cache keys objects by
// the kubestellar.io/space annotation, so a tenant who writes another
// space's name there, by create, update, merge patch or server-side apply,
// must not place its object in that space's part of the cache: the
// storage stamps the true space on every write.
func TestForgedSpaceAnnotationStaysInItsSpace(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "mallory")
	createSpace(t, s, "victim")
	m, v := kube(t, s, "mallory"), kube(t, s, "victim")
	forged := map[string]string{spaces.Annotation: "victim"}

	cm := configMap("default", "created", "m")
	cm.Annotations = forged
	_, err := m.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := m.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "updated", "m"), metav1.CreateOptions{})
	require.NoError(t, err)
	got.Annotations = forged
	_, err = m.CoreV1().ConfigMaps("default").Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = m.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "patched", "m"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = m.CoreV1().ConfigMaps("default").Patch(ctx, "patched", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+spaces.Annotation+`":"victim"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = m.CoreV1().ConfigMaps("default").Apply(ctx, corev1apply.ConfigMap("applied", "default").WithAnnotations(forged),
		metav1.ApplyOptions{FieldManager: "mallory", Force: true})
	require.NoError(t, err)
	// A write in the victim's space after them all: a list that sees it has
	// seen everything before.
	_, err = v.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "own", "v"), metav1.CreateOptions{})
	require.NoError(t, err)

	mine := []string{"applied", "created", "patched", "updated"}
	list, err := v.CoreV1().ConfigMaps("default").List(ctx, written)
	require.NoError(t, err)
	require.Equal(t, []string{"own"}, names(list.Items), "the victim's list")
	list, err = m.CoreV1().ConfigMaps("default").List(ctx, written)
	require.NoError(t, err)
	require.ElementsMatch(t, mine, names(list.Items), "mallory's list")
	for _, cm := range list.Items {
		require.Equal(t, "mallory", cm.Annotations[spaces.Annotation], "%s carries its true space", cm.Name)
	}
	for _, name := range mine {
		_, err := v.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s seen in the victim's space: %v", name, err)
	}
}

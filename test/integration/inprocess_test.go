// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/namespacedefaults"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestCopiesWrittenInProcessAsTheAPIWould: the translator's in-process
// writer stores what a POST or PUT would store, where they would, and
// refuses what they would refuse, with the same reasons: a missing space or
// namespace, an invalid object, a duplicate, a stale resourceVersion. What
// it writes is seen by watches and reads through the API like anything
// else, without managed fields.
func TestCopiesWrittenInProcessAsTheAPIWould(t *testing.T) {
	s := harness.StartInProcess(t, "")
	createSpace(t, s, "team")
	ctx := context.Background()
	api := kube(t, s, "team")
	_, err := api.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	w := s.Config.CopyWriter()
	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	require.True(t, w.Writes(configMaps))
	require.True(t, w.Writes(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}))
	require.False(t, w.Writes(corev1.SchemeGroupVersion.WithResource("namespaces")), "Namespaces have their own REST")
	require.False(t, w.Writes(widgetsGVR), "custom resources are the apiextensions server's")

	configMap := func(namespace, name string, data map[string]string) *unstructured.Unstructured {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"copy": "yes"}}, Data: data})
		require.NoError(t, err)
		return &unstructured.Unstructured{Object: obj}
	}
	team := spaces.WithSpace(ctx, "team")

	watcher, err := api.CoreV1().ConfigMaps("apps").Watch(ctx, metav1.ListOptions{LabelSelector: "copy=yes"})
	require.NoError(t, err)
	defer watcher.Stop()

	// Stored as a POST stores it: metadata filled in, no managed fields,
	// and a watch sees it.
	require.NoError(t, w.Create(team, configMaps, configMap("apps", "settings", map[string]string{"a": "1"})))
	got, err := api.CoreV1().ConfigMaps("apps").Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1"}, got.Data)
	require.NotEmpty(t, got.UID)
	require.False(t, got.CreationTimestamp.IsZero())
	require.Empty(t, got.ManagedFields)
	select {
	case ev := <-watcher.ResultChan():
		require.Equal(t, watch.Added, ev.Type)
		require.Equal(t, "settings", ev.Object.(*corev1.ConfigMap).Name)
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event for the in-process create")
	}
	// Only in its space.
	_, err = kube(t, s, spaces.Root).CoreV1().ConfigMaps("apps").Get(ctx, "settings", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the copy is in space team only: %v", err)

	// Refused as the API refuses, with the same reasons.
	sameAsAPI := func(what string, inProcess error, overHTTP error) {
		t.Helper()
		require.Error(t, inProcess, what)
		require.Error(t, overHTTP, what)
		require.Equal(t, apierrors.ReasonForError(overHTTP), apierrors.ReasonForError(inProcess), "%s: in-process %v, over HTTP %v", what, inProcess, overHTTP)
	}
	_, httpErr := api.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	sameAsAPI("a duplicate", w.Create(team, configMaps, configMap("apps", "settings", nil)), httpErr)
	require.True(t, apierrors.IsAlreadyExists(httpErr))

	_, httpErr = api.CoreV1().ConfigMaps("missing").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	sameAsAPI("a missing namespace", w.Create(team, configMaps, configMap("missing", "x", nil)), httpErr)

	_, httpErr = api.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name"}}, metav1.CreateOptions{})
	sameAsAPI("an invalid name", w.Create(team, configMaps, configMap("apps", "Not_A_Name", nil)), httpErr)
	require.True(t, apierrors.IsInvalid(httpErr))

	_, httpErr = kube(t, s, "nowhere").CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	sameAsAPI("a missing space", w.Create(spaces.WithSpace(ctx, "nowhere"), configMaps, configMap("apps", "x", nil)), httpErr)
	require.True(t, apierrors.IsNotFound(httpErr))

	// Updated as a PUT updates: at its resourceVersion only.
	stale := configMap("apps", "settings", map[string]string{"a": "2"})
	stale.SetResourceVersion(got.ResourceVersion)
	require.NoError(t, w.Update(team, configMaps, stale))
	got2, err := api.CoreV1().ConfigMaps("apps").Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "2"}, got2.Data)
	require.Equal(t, got.UID, got2.UID)
	stale.Object["data"] = map[string]any{"a": "3"}
	got.Data = map[string]string{"a": "3"}
	_, httpErr = api.CoreV1().ConfigMaps("apps").Update(ctx, got, metav1.UpdateOptions{})
	sameAsAPI("a stale resourceVersion", w.Update(team, configMaps, stale), httpErr)
	require.True(t, apierrors.IsConflict(httpErr))

	// An update does not create.
	ghost := configMap("apps", "ghost", nil)
	ghost.SetResourceVersion("1")
	require.True(t, apierrors.IsNotFound(w.Update(team, configMaps, ghost)))
}

// TestCopiesReadInProcessAsTheAPIWould: what the controllers' caches and
// the dashboard list and watch in-process is what a dynamic client's list
// and watch of the same space and selector return, object for object
// (metadata, data, the space annotation, managed fields), and watches see
// creates, updates and deletes of the matching objects only.
func TestCopiesReadInProcessAsTheAPIWould(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	for _, space := range []string{"team", "other"} {
		createSpace(t, s, space)
		api := kube(t, s, space)
		_, err := api.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, cm := range []*corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Labels: map[string]string{"copy": "yes"}, Annotations: map[string]string{"note": "x"}},
				Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {0, 1, 2}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Data: map[string]string{"c": "3"}},
		} {
			_, err := api.CoreV1().ConfigMaps("apps").Create(ctx, cm, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}

	defaultsSettled(t, s) // the lists below are of the same objects
	r := s.Config.CopyReader()
	_, ok := r.ListerWatcher(corev1.SchemeGroupVersion.WithResource("namespaces"), spaces.Wildcard, "")
	require.False(t, ok, "Namespaces have their own REST")
	_, ok = r.ListerWatcher(widgetsGVR, spaces.Wildcard, "")
	require.False(t, ok, "custom resources are the apiextensions server's")

	byName := func(items []unstructured.Unstructured) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, u := range items {
			out[crossSpaceName(&u)] = u.Object
		}
		return out
	}
	for _, c := range []struct{ space, selector string }{
		{spaces.Wildcard, "copy=yes"}, {spaces.Wildcard, ""}, {"team", ""}, {"other", "copy=yes"},
	} {
		lw, ok := r.ListerWatcher(configMaps, c.space, c.selector)
		require.True(t, ok)
		listed, err := cache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		local, ok := listed.(*unstructured.UnstructuredList)
		require.True(t, ok, "a %T", listed)
		require.NotEmpty(t, local.GetResourceVersion())
		overAPI, err := dyn(t, s, c.space).Resource(configMaps).List(ctx, metav1.ListOptions{LabelSelector: c.selector})
		require.NoError(t, err)
		require.NotEmpty(t, overAPI.Items)
		require.Equal(t, byName(overAPI.Items), byName(local.Items), "space %s, selector %q", c.space, c.selector)
	}

	// A watch from the list's resource version sees what matches, in
	// every space, as the API shows it.
	all, _ := r.ListerWatcher(configMaps, spaces.Wildcard, "copy=yes")
	lw := cache.ToListerWatcherWithContext(all)
	listed, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	rv := listed.(*unstructured.UnstructuredList).GetResourceVersion()
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	require.NoError(t, err)
	defer w.Stop()
	other := kube(t, s, "other").CoreV1().ConfigMaps("apps")
	_, err = other.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = other.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{"copy": "yes"}}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = other.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{"copy": "yes"}}, Data: map[string]string{"v": "2"}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	overAPI, err := dyn(t, s, "other").Resource(configMaps).Namespace("apps").Get(ctx, "new", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, other.Delete(ctx, "new", metav1.DeleteOptions{}))
	var seen []watch.EventType
	for len(seen) < 3 {
		select {
		case ev, open := <-w.ResultChan():
			require.True(t, open, "the watch ended")
			if ev.Type == watch.Bookmark {
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			require.True(t, ok, "a %s event of a %T", ev.Type, ev.Object)
			require.Equal(t, "other|apps/new", crossSpaceName(u), "a %s event", ev.Type)
			if ev.Type == watch.Modified {
				require.Equal(t, overAPI.Object, u.Object)
			}
			seen = append(seen, ev.Type)
		case <-time.After(30 * time.Second):
			t.Fatalf("events so far: %v", seen)
		}
	}
	require.Equal(t, []watch.EventType{watch.Added, watch.Modified, watch.Deleted}, seen)

	// No streaming lists, which the server does not serve: a reflector
	// lists, then watches (a watch asking for initial events would start
	// at the datastore's oldest revision).
	require.True(t, watchlist.DoesClientNotSupportWatchListSemantics(all))
	sendInitial := true
	_, err = lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &sendInitial, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	require.True(t, apierrors.IsBadRequest(err), "a streaming list: %v", err)

	// A cache that keeps records of some objects is offered each object
	// typed first (the controllers' caches make their copies' records so);
	// what it declines comes as before.
	converting, ok := r.(interface {
		ListerWatcherConverting(schema.GroupVersionResource, string, string,
			func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool)) (cache.ListerWatcher, bool)
	})
	require.True(t, ok, "the server's reader offers typed objects (a %T)", r)
	var offered []string
	take := func(obj runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, bool) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || gvk.Kind != "ConfigMap" {
			return nil, false // and the list below shows it
		}
		if cm.Name == namespacedefaults.RootCAConfigMap {
			return nil, false
		}
		offered = append(offered, cm.Annotations[spaces.Annotation]+"|"+cm.Namespace+"/"+cm.Name)
		if cm.Name != "labelled" {
			return nil, false
		}
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "record of " + cm.Name}}, true
	}
	clw, ok := converting.ListerWatcherConverting(configMaps, "team", "", take)
	require.True(t, ok)
	listed, err = cache.ToListerWatcherWithContext(clw).ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	items, err := meta.ExtractList(listed)
	require.NoError(t, err)
	rv, err = meta.NewAccessor().ResourceVersion(listed)
	require.NoError(t, err)
	require.NotEmpty(t, rv)
	got := map[string]string{}
	for _, item := range items {
		switch o := item.(type) {
		case *metav1.PartialObjectMetadata:
			got[o.Name] = "taken"
		case *unstructured.Unstructured:
			if o.GetName() != namespacedefaults.RootCAConfigMap {
				got[crossSpaceName(o)] = "unstructured"
			}
		default:
			t.Fatalf("a list item %T", item)
		}
	}
	require.Equal(t, map[string]string{"record of labelled": "taken", "team|apps/plain": "unstructured"}, got)
	require.ElementsMatch(t, []string{"team|apps/labelled", "team|apps/plain"}, offered)
	w, err = cache.ToListerWatcherWithContext(clw).WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv})
	require.NoError(t, err)
	defer w.Stop()
	team := kube(t, s, "team").CoreV1().ConfigMaps("apps")
	_, err = team.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "labelled"}, Data: map[string]string{"a": "2"}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case ev := <-w.ResultChan():
		require.Equal(t, watch.Modified, ev.Type)
		require.Equal(t, "record of labelled", ev.Object.(*metav1.PartialObjectMetadata).Name, "a %T", ev.Object)
	case <-time.After(30 * time.Second):
		t.Fatal("no event of the update")
	}
}

// crossSpaceName is an object's space, namespace and name.
func crossSpaceName(u *unstructured.Unstructured) string {
	return u.GetAnnotations()[spaces.Annotation] + "|" + u.GetNamespace() + "/" + u.GetName()
}

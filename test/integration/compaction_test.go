// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestWatchAfterCompaction: once compaction has passed the revision an idle
// resource's clients last saw, a watch from that revision served by the
// datastore (across spaces, as the controllers watch) answers 410 Gone, as
// kube-apiserver's does from etcd, and informers relist and go on
// receiving new objects: one across spaces (through controller-runtime's
// client, as the controllers' caches are) and one in a space (client-go).
// In a space, the watch cache serves the same watch from its own history,
// as kube-apiserver's watch cache does, and it delivers what comes next.
func TestWatchAfterCompaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := harness.StartInProcess(t, "")
	createSpace(t, s, "idle")
	idle := kube(t, s, "idle")

	_, err := idle.CoreV1().PodTemplates("default").Create(ctx, podTemplate("before"), metav1.CreateOptions{})
	require.NoError(t, err)
	list, err := idle.CoreV1().PodTemplates("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	idleRV := list.ResourceVersion

	inSpace := startPodTemplateInformer(t, ctx, typedPodTemplates(idle, "default"))
	acrossSpaces := startPodTemplateInformer(t, ctx, wildcardPodTemplates(t, s))
	require.True(t, inSpace.has("before") && acrossSpaces.has("before"))

	// Both informers listed at or before the current revision. The one
	// across spaces is held: its open watch passes on no bookmark and it
	// starts no other until released. A bookmark during the churn would
	// tell it a later revision (rightly: nothing was missed), and it would
	// then never resume from a compacted one. (Ending its watch instead
	// would not do: client-go lists again after a watch that ends young,
	// and a list is served at the current revision.)
	acrossSpaces.hold()
	current, err := idle.CoreV1().PodTemplates("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	churnPastRevision(t, ctx, s, current.ResourceVersion)

	// A plain watch across spaces from the compacted revision: 410 Gone,
	// reason Expired.
	_, err = firstEvent(ctx, kube(t, s, spaces.Wildcard), "", idleRV)
	require.True(t, apierrors.IsResourceExpired(err), "want 410 Expired, got %v", err)
	status, ok := err.(apierrors.APIStatus)
	require.True(t, ok)
	require.EqualValues(t, 410, status.Status().Code)

	// Released, the informer resumes from the revision it last saw, which
	// compaction has passed: it gets 410 and lists again (a list for
	// another reason, such as a watch ended young, does not count)...
	acrossSpaces.release()
	eventually(t, time.Minute, func() (bool, error) { return acrossSpaces.listsAfterExpired.Load() > 0, nil },
		"the informer across spaces to be told 410 and list again after its watch's revision was compacted")

	// ...and so they see what is created next, as the informer in the
	// space does, and a watch in the space from the compacted revision.
	inSpaceEvents := make(chan watch.Event, 1)
	go func() {
		ev, err := firstEvent(ctx, idle, "default", idleRV)
		if err != nil {
			ev = watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(err).ErrStatus}
		}
		inSpaceEvents <- ev
	}()
	_, err = idle.CoreV1().PodTemplates("default").Create(ctx, podTemplate("after"), metav1.CreateOptions{})
	require.NoError(t, err)
	for name, inf := range map[string]*podTemplateInformer{"in the space": inSpace, "across spaces": acrossSpaces} {
		eventually(t, time.Minute, func() (bool, error) { return inf.has("after"), nil },
			"the informer %s to receive the pod template made after compaction", name)
	}
	ev := <-inSpaceEvents
	require.Equal(t, watch.Added, ev.Type, "the watch in the space from the compacted revision: %v", ev.Object)
	require.Equal(t, "after", ev.Object.(*corev1.PodTemplate).Name)
}

// firstEvent starts a watch of pod templates in namespace ("" for all)
// from rv and returns its first event, or the error it ends with: the
// request's own, or that of its first event.
func firstEvent(ctx context.Context, c kubernetes.Interface, namespace, rv string) (watch.Event, error) {
	w, err := c.CoreV1().PodTemplates(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return watch.Event{}, err
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return watch.Event{}, fmt.Errorf("the watch from revision %s ended without an event", rv)
		}
		if ev.Type == watch.Error {
			return watch.Event{}, apierrors.FromObject(ev.Object)
		}
		return ev, nil
	case <-ctx.Done():
		return watch.Event{}, fmt.Errorf("the watch from revision %s gave nothing: %w", rv, ctx.Err())
	}
}

// isExpired tells whether err is the 410 of a compacted revision.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

func podTemplate(name string) *corev1.PodTemplate {
	return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}
}

// podTemplateLW lists and watches pod templates.
type podTemplateLW struct {
	list  func(ctx context.Context, opts metav1.ListOptions) (*corev1.PodTemplateList, error)
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func typedPodTemplates(c kubernetes.Interface, namespace string) podTemplateLW {
	return podTemplateLW{
		list: func(ctx context.Context, opts metav1.ListOptions) (*corev1.PodTemplateList, error) {
			return c.CoreV1().PodTemplates(namespace).List(ctx, opts)
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().PodTemplates(namespace).Watch(ctx, opts)
		},
	}
}

// wildcardPodTemplates lists and watches across spaces as the controllers'
// caches do (controllers/internal/crossspace).
func wildcardPodTemplates(t *testing.T, s *harness.InProcess) podTemplateLW {
	c, err := client.NewWithWatch(spaces.ScopedConfig(s.RESTConfig(t, spaces.Root)), client.Options{})
	require.NoError(t, err)
	wildcard := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, spaces.Wildcard) }
	return podTemplateLW{
		list: func(ctx context.Context, opts metav1.ListOptions) (*corev1.PodTemplateList, error) {
			l := &corev1.PodTemplateList{}
			return l, c.List(wildcard(ctx), l, &client.ListOptions{Raw: &opts})
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(wildcard(ctx), &corev1.PodTemplateList{}, &client.ListOptions{Raw: &opts})
		},
	}
}

// podTemplateInformer records the pod templates it is told of, and counts
// the 410s its watches get and the lists that follow one. Its watches can
// be held.
type podTemplateInformer struct {
	expired, listsAfterExpired atomic.Int64

	mu   sync.Mutex
	seen map[string]bool
	// released is closed while watches may run.
	released chan struct{}
}

// hold keeps bookmarks from the informer's open watch, which the server
// ends within 2 s, and makes its next one wait for release. The informer
// then learns no revision later than the current one.
func (r *podTemplateInformer) hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = make(chan struct{})
}

func (r *podTemplateInformer) held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.released:
		return false
	default:
		return true
	}
}

func (r *podTemplateInformer) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.released)
}

// watch waits until watches may run, then starts one, counting 410s and
// keeping bookmarks from the informer while it is held.
func (r *podTemplateInformer) watch(ctx context.Context, start func() (watch.Interface, error)) (watch.Interface, error) {
	r.mu.Lock()
	released := r.released
	r.mu.Unlock()
	select {
	case <-released:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w, err := start()
	if isExpired(err) {
		r.expired.Add(1)
	}
	if err != nil {
		return w, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type == watch.Error && isExpired(apierrors.FromObject(ev.Object)) {
			r.expired.Add(1)
		}
		return ev, ev.Type != watch.Bookmark || !r.held()
	}), nil
}

func (r *podTemplateInformer) has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[name]
}

// startPodTemplateInformer runs an informer (the controllers' kind:
// spaces.NewInformer) whose watches the server ends after 2 s, so that it
// resumes often from the revision it last saw.
func startPodTemplateInformer(t *testing.T, ctx context.Context, plw podTemplateLW) *podTemplateInformer {
	t.Helper()
	rec := &podTemplateInformer{seen: map[string]bool{}, released: make(chan struct{})}
	close(rec.released)
	timeout := int64(2)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := plw.list(ctx, opts)
			if err == nil && rec.expired.Load() > 0 {
				rec.listsAfterExpired.Add(1)
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.TimeoutSeconds = &timeout
			return rec.watch(ctx, func() (watch.Interface, error) { return plw.watch(ctx, opts) })
		},
	}
	_, controller := spaces.NewInformer(lw, &corev1.PodTemplate{}, 0, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.seen[obj.(*corev1.PodTemplate).Name] = true
		},
	})
	ictx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go controller.RunWithContext(ictx)
	eventually(t, 30*time.Second, func() (bool, error) { return controller.HasSynced(), nil }, "the informer to sync")
	return rec
}

// churnPastRevision creates and deletes ConfigMaps until compaction, which
// keeps the last storage.DefaultCompactMinRetain revisions, can pass rv,
// then compacts.
func churnPastRevision(t *testing.T, ctx context.Context, s *harness.InProcess, rv string) {
	t.Helper()
	target, err := strconv.ParseInt(rv, 10, 64)
	require.NoError(t, err)
	cfg := s.RESTConfig(t, spaces.Root)
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const workers = 8
	for wave := 0; ; wave++ {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					name := fmt.Sprintf("churn-%d-%d-%d", wave, w, i)
					if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
					if err := c.CoreV1().ConfigMaps("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		list, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		current, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
		require.NoError(t, err)
		if current-storage.DefaultCompactMinRetain > target+10 {
			break
		}
	}
	require.NoError(t, s.Config.Datastore.Compact(ctx))
}

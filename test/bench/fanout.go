// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// fanout places objects on many SyncTargets and measures how long until
// every mailbox copy exists, and how long one update takes to reach them all.
//
// Last, it restarts the server (s then names the new process) with every
// copy in place, and times an update from the stop to its arrival in
// every mailbox: the controllers' caches list every copy first.
func fanout(ctx context.Context, bin string, s *server, targets, objects int, syncerWatches bool, profiles string, progress func(string, ...any)) ([]row, error) {
	root := s.config(spaces.Root)
	dyn := dynamic.NewForConfigOrDie(root)
	for _, name := range []string{"bench-inv", "bench-wds"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(tenancyv1alpha1.SchemeGroupVersion.String())
		u.SetKind("Space")
		u.SetName(name)
		if name == "bench-inv" {
			_ = unstructured.SetNestedField(u.Object, tenancyv1alpha1.SpaceTypeInventory, "spec", "type")
		} else {
			_ = unstructured.SetNestedField(u.Object, tenancyv1alpha1.SpaceTypeWDS, "spec", "type")
			_ = unstructured.SetNestedStringSlice(u.Object, []string{"bench-inv"}, "spec", "inventorySpaces")
		}
		if _, err := dyn.Resource(tenancyv1alpha1.SpacesGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	wds := kubernetes.NewForConfigOrDie(s.config("bench-wds"))
	if err := waitFor(ctx, func() bool {
		_, err := wds.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return nil, err
	}
	if _, err := wds.CoreV1().Namespaces().Create(ctx, namespace("fan"), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for i := range objects {
		cm := configMap(fmt.Sprintf("obj-%03d", i))
		cm.Data["version"] = "1"
		if _, err := wds.CoreV1().ConfigMaps("fan").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}

	// Count copies as they appear, with one watch across all spaces.
	w, err := watchCopies(ctx, root)
	if err != nil {
		return nil, err
	}
	defer w.Stop()

	progress("creating %d SyncTargets and Locations", targets)
	requests0, err := requestCounts(ctx, s)
	if err != nil {
		return nil, err
	}
	created := time.Now()
	makeCPU0, err := procCPU(s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	if profiles != "" {
		// What the server spends making the mailboxes: its CPU over the
		// first 30 s from the first SyncTarget.
		stop, err := cpuProfile(ctx, s, filepath.Join(profiles, fmt.Sprintf("fanout-%d-mailboxes.pb.gz", targets)))
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	inv := dynamic.NewForConfigOrDie(s.config("bench-inv"))
	stGVR := edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")
	locGVR := edgev2alpha1.SchemeGroupVersion.WithResource("locations")
	if _, err := parallel(16, targets, func(i int) error {
		name := fmt.Sprintf("edge-%04d", i)
		st := obj("SyncTarget", name, map[string]any{"env": "bench", "name": name}, nil)
		if _, err := inv.Resource(stGVR).Create(ctx, st, metav1.CreateOptions{}); err != nil {
			return err
		}
		loc := obj("Location", name, map[string]any{"env": "bench"}, map[string]any{
			"resource":         map[string]any{"group": edgev2alpha1.GroupName, "version": "v2alpha1", "resource": "synctargets"},
			"instanceSelector": map[string]any{"matchLabels": map[string]any{"name": name}},
		})
		_, err := inv.Resource(locGVR).Create(ctx, loc, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	createdIn := time.Since(created)
	progress("%d SyncTargets and Locations created in %s", targets, createdIn.Round(time.Millisecond))

	// The mailboxes are made as the SyncTargets appear. The fan-out is
	// timed from when they are all ready, as it is for a placement made on
	// an existing fleet: the SyncTargets' arrival is a figure of its own.
	progress("waiting for %d mailbox spaces", targets)
	if err := mailboxesReady(ctx, dyn, targets); err != nil {
		return nil, err
	}
	mailboxes := time.Since(created)
	makeCPU1, err := procCPU(s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	makeCPU := makeCPU1 - makeCPU0
	if requests1, err := requestCounts(ctx, s); err == nil {
		progress("the server's busiest requests and queues, %d mailboxes made:", targets)
		for _, line := range busiest(requests0, requests1, 20) {
			progress("  %s", line)
		}
	}
	held := "no watch of the mailboxes but the bench's own across all spaces"
	if syncerWatches {
		progress("watching the copies in each of the %d mailboxes, as its syncer does", targets)
		stopWatches, n, err := watchMailboxes(ctx, s, dyn)
		if err != nil {
			return nil, err
		}
		defer stopWatches()
		held = fmt.Sprintf("a watch of the copies in each of the %d mailboxes held meanwhile, as each one's syncer holds one", n)
	}

	progress("placing %d objects on %d SyncTargets (%d copies)", objects, targets, objects*targets)
	began := time.Now()
	cpuBefore, err := procCPU(s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	ep := &edgev2alpha1.EdgePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "EdgePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: "fan"},
		Spec: edgev2alpha1.EdgePlacementSpec{
			LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "bench"}}},
			Downsync:          []edgev2alpha1.DownsyncClause{{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{"fan"}}},
		},
	}
	u, err := toUnstructured(ep)
	if err != nil {
		return nil, err
	}
	if _, err := dynamic.NewForConfigOrDie(s.config("bench-wds")).Resource(edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements")).
		Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	want := targets * objects
	seen := map[string]bool{}
	lastReport := time.Now()
	for len(seen) < want {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, fmt.Errorf("watch ended after %d of %d copies", len(seen), want)
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added {
				seen[cm.Annotations[spaces.Annotation]+"/"+cm.Name] = true
			}
		case <-time.After(5 * time.Minute):
			return nil, fmt.Errorf("only %d of %d copies after 5 minutes without progress", len(seen), want)
		}
		if time.Since(lastReport) > 10*time.Second {
			progress("%d of %d copies after %s", len(seen), want, time.Since(began).Round(time.Second))
			lastReport = time.Now()
		}
	}
	fanTook := time.Since(began)
	rss := s.rss()
	cpuAfter, err := procCPU(s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}

	progress("updating one object")
	began = time.Now()
	if err := updateEverywhere(ctx, wds, w, "2", targets); err != nil {
		return nil, err
	}
	updateTook := time.Since(began)
	// The RSS at the last copy is near the peak: the copies' watch events
	// are still being decoded and the garbage of the writes not yet
	// collected. What the server keeps is measured once it is idle.
	settledAfter, err := settle(ctx, s.cmd.Process.Pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	progress("%s at rest after the fan-out", restWindow)
	rssRest, _, err := atRest(ctx, s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	// RSS follows the collector's cycle (the heap grows to twice what is
	// live before a collection); the live heap after one is what the
	// server holds.
	if err := collectGarbage(ctx, s); err != nil {
		return nil, err
	}
	live, err := scrape(ctx, s, "go_gc_heap_live_bytes")
	if err != nil {
		return nil, err
	}

	progress("restarting the server with the %d copies, then updating one object", want)
	w.Stop()
	stopped := time.Now()
	s.stop()
	// Until it is ready, every watch cache lists its resource from the
	// datastore, the copies in mailboxes too (which it drops): with a
	// million copies (-fanout-targets 10000) the server was ready after
	// 1 min 42 s, past the minute other restarts are given.
	restarted, err := startOn(ctx, bin, s.dataDir, s.port, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	*s = *restarted
	ready := time.Since(stopped)
	wds = kubernetes.NewForConfigOrDie(s.config("bench-wds"))
	w, err = watchCopies(ctx, s.config(spaces.Root))
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	if err := updateEverywhere(ctx, wds, w, "3", targets); err != nil {
		return nil, err
	}
	restartUpdate := time.Since(stopped)
	mem, err := procMemory(s.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	timeGoal, memoryGoal := fanoutGoals(objects, targets)
	return []row{
		{fmt.Sprintf("mailboxes: %d SyncTargets created → their mailbox spaces ready", targets), mailboxes.Round(time.Millisecond).String(),
			fmt.Sprintf("the bench's creates took %s; the server's CPU meanwhile %.1f ms per SyncTarget (%.2f cores)",
				createdIn.Round(time.Millisecond), float64(makeCPU.Microseconds())/1000/float64(targets), makeCPU.Seconds()/mailboxes.Seconds())},
		{fmt.Sprintf("fan-out: %d objects × %d SyncTargets", objects, targets), fanTook.Round(time.Millisecond).String(),
			fmt.Sprintf("%d copies, %.0f copies/s; %s%s", want, float64(want)/fanTook.Seconds(), held, timeGoal)},
		{"server CPU per copy during fan-out", fmt.Sprintf("%.0f µs", float64((cpuAfter-cpuBefore).Microseconds())/float64(want)),
			fmt.Sprintf("utime+stime of the server from the placement to its last copy (%s) ÷ copies", (cpuAfter - cpuBefore).Round(time.Millisecond))},
		{"server RSS after fan-out", mib(rss), "at the last copy" + memoryGoal},
		{fmt.Sprintf("one update → all %d mailboxes", targets), updateTook.Round(time.Millisecond).String(), ""},
		{"server RSS at rest after fan-out", mib(rssRest), restNote(settledAfter) + memoryGoal},
		{"server live heap after fan-out", mib(int64(live["go_gc_heap_live_bytes"])),
			fmt.Sprintf("after a collection; %.0f bytes per copy", live["go_gc_heap_live_bytes"]/float64(want))},
		{fmt.Sprintf("restart with %d copies: SIGTERM → an update in all %d mailboxes", want, targets), restartUpdate.Round(time.Millisecond).String(),
			fmt.Sprintf("ready %s after the SIGTERM; the controllers' caches list every copy before the update is placed", ready.Round(time.Millisecond))},
		{"server peak RSS from the restart to the update's last copy", mib(mem["VmHWM"]), "VmHWM"},
	}, nil
}

// fanoutGoals are the targets for a fan-out of its two sizes, as
// notes ("; target ..."): 100 objects on 1,000 SyncTargets in a minute
// and 600 MiB, on 10,000 in 15 minutes and 4 GiB. Other sizes have none.
func fanoutGoals(objects, targets int) (time, memory string) {
	switch {
	case objects == 100 && targets == 1000:
		return "; target ≤ 60 s", "; target ≤ 600 MiB"
	case objects == 100 && targets == 10000:
		return "; target ≤ 15 min", "; target ≤ 4 GiB"
	}
	return "", ""
}

// watchCopies watches the mailbox copies in every space, from now on. The
// server ends a watch after 30 to 60 minutes, as kube-apiserver does (a
// fan-out to 10,000 SyncTargets takes about as long); the watch resumes
// from the last event it passed on.
func watchCopies(ctx context.Context, root *rest.Config) (watch.Interface, error) {
	wildcard := rest.CopyConfig(root)
	wildcard.Host += spaces.PathPrefix + spaces.Wildcard
	cms := kubernetes.NewForConfigOrDie(wildcard).CoreV1().ConfigMaps("")
	selector := edgev2alpha1.PlacementCopyLabel + "=true"
	now, err := cms.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
	if err != nil {
		return nil, err
	}
	return watchtools.NewRetryWatcherWithContext(ctx, now.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return cms.Watch(ctx, opts)
		},
	})
}

// updateEverywhere sets the data version of object obj-000 in the WDS and
// waits until w, a watch of the copies in every mailbox, has seen it
// reach targets mailboxes.
func updateEverywhere(ctx context.Context, wds kubernetes.Interface, w watch.Interface, version string, targets int) error {
	cm, err := wds.CoreV1().ConfigMaps("fan").Get(ctx, "obj-000", metav1.GetOptions{})
	if err != nil {
		return err
	}
	cm.Data["version"] = version
	if _, err := wds.CoreV1().ConfigMaps("fan").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	updated := map[string]bool{}
	for len(updated) < targets {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch ended after the update reached %d of %d mailboxes", len(updated), targets)
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == "obj-000" && cm.Data["version"] == version {
				updated[cm.Annotations[spaces.Annotation]] = true
			}
		case <-time.After(5 * time.Minute):
			return fmt.Errorf("the update reached only %d of %d mailboxes", len(updated), targets)
		}
	}
	return nil
}

func obj(kind, name string, labels map[string]any, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": edgev2alpha1.SchemeGroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "labels": labels}}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func toUnstructured(o any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func waitFor(ctx context.Context, cond func() bool) error {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// mailboxesReady waits until n mailbox spaces are Ready, for as long as
// more become ready every few minutes: 10,000 take far longer than 1,000.
// It lists the Spaces, then follows them with a watch (listing them again
// when the watch ends): a list of every Space each second was itself a
// quarter of the server's CPU with 5,000 mailboxes.
func mailboxesReady(ctx context.Context, root dynamic.Interface, n int) error {
	const stall = 3 * time.Minute
	ready := map[string]bool{}
	count := func() int {
		c := 0
		for _, r := range ready {
			if r {
				c++
			}
		}
		return c
	}
	note := func(u *unstructured.Unstructured, deleted bool) {
		typ, _, _ := unstructured.NestedString(u.Object, "spec", "type")
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		ready[u.GetName()] = !deleted && typ == tenancyv1alpha1.SpaceTypeMailbox && phase == string(tenancyv1alpha1.SpacePhaseReady)
	}
	best, progressed := -1, time.Now()
	for {
		list, err := root.Resource(tenancyv1alpha1.SpacesGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(time.Second)
			continue
		}
		clear(ready)
		for i := range list.Items {
			note(&list.Items[i], false)
		}
		w, err := root.Resource(tenancyv1alpha1.SpacesGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			// Not at once: each try lists every Space again.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			continue
		}
		tick := time.NewTicker(time.Second)
	watching:
		for {
			if got := count(); got >= n {
				w.Stop()
				tick.Stop()
				return nil
			} else if got > best {
				best, progressed = got, time.Now()
			}
			if time.Since(progressed) > stall {
				w.Stop()
				tick.Stop()
				return fmt.Errorf("%d of %d mailbox spaces ready: none more in %s", best, n, stall)
			}
			select {
			case <-ctx.Done():
				w.Stop()
				tick.Stop()
				return ctx.Err()
			case <-tick.C:
			case ev, ok := <-w.ResultChan():
				if !ok {
					break watching
				}
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					note(u, ev.Type == watch.Deleted)
				}
			}
		}
		tick.Stop()
	}
}

// watchMailboxes watches, in each mailbox space, the placement's copies of
// ConfigMaps, as the mailbox's syncer does (in protobuf, as the syncer's
// clients ask), and drains the events. It returns a function that stops
// the watches, and how many there are.
func watchMailboxes(ctx context.Context, s *server, root dynamic.Interface) (func(), int, error) {
	list, err := root.Resource(tenancyv1alpha1.SpacesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	var watches []watch.Interface
	stop := func() {
		for _, w := range watches {
			w.Stop()
		}
	}
	for i := range list.Items {
		if typ, _, _ := unstructured.NestedString(list.Items[i].Object, "spec", "type"); typ != tenancyv1alpha1.SpaceTypeMailbox {
			continue
		}
		cfg := s.config(list.Items[i].GetName())
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			stop()
			return nil, 0, err
		}
		w, err := client.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{LabelSelector: edgev2alpha1.PlacementCopyLabel + "=true"})
		if err != nil {
			stop()
			return nil, 0, fmt.Errorf("watching the copies in %s: %w", list.Items[i].GetName(), err)
		}
		watches = append(watches, w)
		go func() {
			for range w.ResultChan() {
			}
		}()
	}
	return stop, len(watches), nil
}

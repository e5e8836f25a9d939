// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// The syncer section's fixtures: one inventory space, one WDS, one edge
// cluster and its SyncTarget, and a namespace whose ConfigMaps and Gauges
// one EdgePlacement downsyncs with the singleton reported state.
const (
	syncInv   = "bench-inv"
	syncWDS   = "bench-wds"
	syncEdge  = "bench-edge"
	syncNS    = "bench"
	gaugeCRD  = "gauges.bench.kubestellar.io"
	gaugeKind = "Gauge"
	// quietLong is how long after the last change the syncer's memory is
	// read a second time, as at rest.
	quietLong = 30 * time.Second
)

var (
	gaugesGVR = schema.GroupVersionResource{Group: "bench.kubestellar.io", Version: "v1", Resource: "gauges"}
	crdsGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	stGVR     = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")
	epGVR     = edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements")
)

// syncerOptions configures the syncer section.
type syncerOptions struct {
	objects int     // ConfigMaps, and Gauges, to sync
	rate    float64 // creates (and edge status patches) per second
	// burstObjects ConfigMaps are created at burstRate per second, last,
	// for the propagation latency under load (0 skips).
	burstObjects int
	burstRate    float64
	// bursts is how many such bursts to measure (-repeat).
	bursts int
}

// syncerBench measures the edge syncer with the built binary, one real edge
// cluster (test/edgecluster) and one `kubestellar syncer join` process, on
// the fresh server s: WDS create → edge ADDED latency, edge status → WDS
// singleton status latency, and the syncer's idle resident memory.
func syncerBench(ctx context.Context, bin string, s *server, o syncerOptions, progress func(string, ...any)) (_ []row, err error) {
	for _, args := range [][]string{{syncInv, "--type", "inventory"}, {syncWDS, "--type", "wds", "--inventory-space", syncInv}} {
		if _, err := s.cli(ctx, bin, append([]string{"space", "create"}, append(args, "--no-context")...)...); err != nil {
			return nil, err
		}
	}

	joined, err := joinEdge(ctx, bin, s, syncInv, syncEdge, "env=bench", prefixed(progress, "syncer: "))
	if err != nil {
		return nil, err
	}
	defer func() {
		err = joined.withLog(err)
		if stopErr := joined.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	cluster, syncer := joined.cluster, joined.syncer

	wdsCfg := s.config(syncWDS)
	wds := kubernetes.NewForConfigOrDie(wdsCfg)
	wdsDyn := dynamic.NewForConfigOrDie(wdsCfg)
	// client-go's default 5 requests/s would pace the edge status patches.
	edgeCfg := rest.CopyConfig(cluster.Config)
	edgeCfg.QPS, edgeCfg.Burst = 1000, 2000
	edge := kubernetes.NewForConfigOrDie(edgeCfg)
	edgeDyn := dynamic.NewForConfigOrDie(edgeCfg)
	if err := placeWorkload(ctx, syncer, wds, wdsDyn); err != nil {
		return nil, err
	}
	progress("syncer: waiting for the namespace and the Gauge CRD at the edge")
	if err := syncer.poll(ctx, 2*time.Minute, "the namespace and an established Gauge CRD at the edge", func(ctx context.Context) (bool, error) {
		if _, err := edge.CoreV1().Namespaces().Get(ctx, syncNS, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		crd, err := edgeDyn.Resource(crdsGVR).Get(ctx, gaugeCRD, metav1.GetOptions{})
		return err == nil && established(crd), nil
	}); err != nil {
		return nil, err
	}

	// 1. WDS create → ADDED at the edge.
	cmWatch, err := edge.CoreV1().ConfigMaps(syncNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	defer cmWatch.Stop()
	cmArrivals := collect(cmWatch, configMapAdded)
	progress("syncer: creating %d ConfigMaps in the WDS at %g/s", o.objects, o.rate)
	sent := make(map[string]time.Time, o.objects)
	createsTook, err := paced(ctx, o.objects, o.rate, func(i int) error {
		name := fmt.Sprintf("cm-%03d", i)
		if _, err := wds.CoreV1().ConfigMaps(syncNS).Create(ctx, configMap(name), metav1.CreateOptions{}); err != nil {
			return err
		}
		sent[name] = time.Now()
		return nil
	})
	if err != nil {
		return nil, err
	}
	propagation, err := cmArrivals.wait(ctx, sent, syncer, progress, "ConfigMaps at the edge")
	if err != nil {
		return nil, err
	}

	// 2. Edge status → WDS singleton status. Nothing at the edge writes the
	// Gauges' status, so each value seen in the WDS is the one set here.
	progress("syncer: creating %d Gauges in the WDS", o.objects)
	if _, err := paced(ctx, o.objects, o.rate, func(i int) error {
		_, err := wdsDyn.Resource(gaugesGVR).Namespace(syncNS).Create(ctx, gauge(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	progress("syncer: waiting for the %d Gauges at the edge and their executing-count in the WDS", o.objects)
	if err := syncer.poll(ctx, 3*time.Minute, fmt.Sprintf("%d Gauges at the edge, each counted as executing in the WDS", o.objects), func(ctx context.Context) (bool, error) {
		atEdge, err := edgeDyn.Resource(gaugesGVR).Namespace(syncNS).List(ctx, metav1.ListOptions{})
		if err != nil || len(atEdge.Items) < o.objects {
			return false, nil
		}
		inWDS, err := wdsDyn.Resource(gaugesGVR).Namespace(syncNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		counted := 0
		for _, g := range inWDS.Items {
			if _, ok := g.GetLabels()[edgev2alpha1.ExecutingCountLabel]; ok {
				counted++
			}
		}
		return counted >= o.objects, nil
	}); err != nil {
		return nil, err
	}
	gaugeWatch, err := wdsDyn.Resource(gaugesGVR).Namespace(syncNS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	defer gaugeWatch.Stop()
	statusArrivals := collect(gaugeWatch, func(ev watch.Event) (string, bool) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
			return "", false
		}
		v, found, _ := unstructured.NestedInt64(u.Object, "status", "value")
		return u.GetName(), found && u.GetName() == gaugeName(int(v))
	})
	progress("syncer: patching the status of %d Gauges at the edge at %g/s", o.objects, o.rate)
	patched := make(map[string]time.Time, o.objects)
	patchesTook, err := paced(ctx, o.objects, o.rate, func(i int) error {
		patch := fmt.Appendf(nil, `{"status":{"value":%d}}`, i)
		if _, err := edgeDyn.Resource(gaugesGVR).Namespace(syncNS).Patch(ctx, gaugeName(i), types.MergePatchType, patch,
			metav1.PatchOptions{}, "status"); err != nil {
			return err
		}
		patched[gaugeName(i)] = time.Now()
		return nil
	})
	if err != nil {
		return nil, err
	}
	statusReturn, err := statusArrivals.wait(ctx, patched, syncer, progress, "statuses in the WDS")
	if err != nil {
		return nil, err
	}

	// 3. Idle memory.
	progress("syncer: 5 s of quiet before reading the syncer's memory")
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(5 * time.Second):
	}
	if syncer.exited() {
		return nil, errors.New("the syncer exited")
	}
	mem, err := procMemory(syncer.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	// And once the last work is well behind: pages of the binary that the
	// work mapped and nothing uses at rest stay resident until the kernel
	// needs them, so the figure 5 s after is not the rest.
	progress("syncer: %s more of quiet", quietLong-5*time.Second)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(quietLong - 5*time.Second):
	}
	if syncer.exited() {
		return nil, errors.New("the syncer exited")
	}
	memLater, err := procMemory(syncer.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}

	// 3b. The same, with the binary's pages read from disk. The figures
	// above map the binary as the page cache holds it after the build wrote
	// it; on this kernel that is in folios of up to 2 MiB, each mapped
	// whole on its first touch. On an edge machine after a boot the pages
	// come from disk by readahead, in smaller folios.
	cold, err := coldRestart(ctx, bin, joined, 2*o.objects, progress)
	if err != nil {
		return nil, err
	}
	syncer = joined.syncer

	// 4. WDS create → ADDED at the edge again, at a high rate, last (the
	// objects it adds would change the idle figures).
	var burst []row
	if o.burstObjects > 0 {
		// The copies' arrival in the mailbox too, to tell the center's part
		// from the edge's.
		st, err := dynamic.NewForConfigOrDie(s.config(syncInv)).Resource(stGVR).Get(ctx, syncEdge, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		mailbox, _, _ := unstructured.NestedString(st.Object, "status", "mailboxSpace")
		if mailbox == "" {
			return nil, fmt.Errorf("SyncTarget %s/%s names no mailbox", syncInv, syncEdge)
		}
		mbWatch, err := kubernetes.NewForConfigOrDie(s.config(mailbox)).CoreV1().ConfigMaps(syncNS).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		defer mbWatch.Stop()
		mbArrivals := collect(mbWatch, configMapAdded)
		// Every process's CPU over the burst, from the first create to the
		// last copy at the edge: on one machine, what bounds the rate the
		// pipeline can keep up with.
		procs := procGroups{"edge cluster": cluster.PIDs(), "server": {"server": s.cmd.Process.Pid},
			"syncer": {"syncer": syncer.cmd.Process.Pid}, "bench": {"bench": os.Getpid()}}
		// With -repeat, o.bursts bursts of new ConfigMaps, one after the
		// other, each once the server has settled from the one before.
		var runs []burstRun
		for run := 1; run <= max(o.bursts, 1); run++ {
			prefix := "burst-"
			if run > 1 {
				prefix = fmt.Sprintf("burst%d-", run)
				if _, err := settle(ctx, s.cmd.Process.Pid, 2*time.Minute); err != nil {
					return nil, err
				}
			}
			cpuBefore, err := procs.cpu()
			if err != nil {
				return nil, err
			}
			if o.bursts > 1 {
				progress("syncer: burst %d of %d", run, o.bursts)
			}
			progress("syncer: creating %d more ConfigMaps in the WDS at %g/s", o.burstObjects, o.burstRate)
			var mu sync.Mutex
			burstSent := make(map[string]time.Time, o.burstObjects)
			took, err := pacedConcurrent(ctx, o.burstObjects, o.burstRate, burstInFlight, func(i int) error {
				name := fmt.Sprintf("%s%04d", prefix, i)
				if _, err := wds.CoreV1().ConfigMaps(syncNS).Create(ctx, configMap(name), metav1.CreateOptions{}); err != nil {
					return err
				}
				mu.Lock()
				burstSent[name] = time.Now()
				mu.Unlock()
				return nil
			})
			if err != nil {
				return nil, err
			}
			lat, err := cmArrivals.wait(ctx, burstSent, syncer, progress, "ConfigMaps of the burst at the edge")
			if err != nil {
				return nil, err
			}
			cpuAfter, err := procs.cpu()
			if err != nil {
				return nil, err
			}
			center, err := mbArrivals.wait(ctx, burstSent, syncer, progress, "ConfigMaps of the burst in the mailbox")
			if err != nil {
				return nil, err
			}
			runs = append(runs, burstRun{took: took, edge: lat, center: center, cpu: perOp(cpuBefore, cpuAfter, o.burstObjects)})
		}
		burst = burstRows(o, runs)
	}

	const theirs = "KubeStellar's performance test reports about 5 s on average"
	return append([]row{
		{"syncer: WDS create → edge ADDED p50", ms(percentile(propagation, 50)), fmt.Sprintf("%d ConfigMaps created at %g/s (in %s), one edge cluster; %s", o.objects, o.rate, createsTook.Round(100*time.Millisecond), theirs)},
		{"syncer: WDS create → edge ADDED p99", ms(percentile(propagation, 99)), "target ≤ 1 s"},
		{"syncer: WDS create → edge ADDED max", ms(percentile(propagation, 100)), ""},
		{"syncer: edge status → WDS status p50", ms(percentile(statusReturn, 50)), fmt.Sprintf("%d status patches at %g/s (in %s) at the edge (a CRD's objects), singleton status; %s", o.objects, o.rate, patchesTook.Round(100*time.Millisecond), theirs)},
		{"syncer: edge status → WDS status p99", ms(percentile(statusReturn, 99)), "target ≤ 1 s"},
		{"syncer: edge status → WDS status max", ms(percentile(statusReturn, 100)), ""},
		{"syncer idle RSS (VmRSS)", mib(mem["VmRSS"]), fmt.Sprintf("5 s after the last change, %d objects synced; target ≤ 40 MB", 2*o.objects)},
		{"syncer idle RssAnon", mib(mem["RssAnon"]), "heap and stacks: the syncer's own memory"},
		{"syncer idle RssFile", mib(mem["RssFile"]), "mapped pages of the binary, which also holds the whole server, as the page cache holds it after the build wrote it"},
		{fmt.Sprintf("syncer idle RSS (VmRSS), %s after", quietLong), mib(memLater["VmRSS"]), fmt.Sprintf("RssAnon %s, RssFile %s; target ≤ 40 MB", mib(memLater["RssAnon"]), mib(memLater["RssFile"]))},
		cold,
	}, burst...), nil
}

// coldRestart restarts the syncer from a copy of bin that is not in the
// page cache, as on an edge machine just booted, waits until it has synced
// its objects again and 5 s more, and reads its memory.
func coldRestart(ctx context.Context, bin string, joined *joinedEdge, objects int, progress func(string, ...any)) (row, error) {
	progress("syncer: restarting the syncer from a copy of the binary evicted from the page cache")
	copyPath, resident, err := coldCopy(bin, joined.dataDir)
	if err != nil {
		return row{}, err
	}
	if err := joined.restartSyncer(copyPath); err != nil {
		return row{}, err
	}
	syncer := joined.syncer
	// The syncer says so once its first pass is through, counting the
	// namespace and the CRD with the objects.
	firstSync := regexp.MustCompile(`(\d+) objects synced to the edge cluster`)
	synced := 0
	if err := syncer.poll(ctx, 2*time.Minute, "the restarted syncer's first sync", func(context.Context) (bool, error) {
		data, _ := os.ReadFile(syncer.logPath)
		m := firstSync.FindSubmatch(data)
		if m == nil {
			return false, nil
		}
		synced, _ = strconv.Atoi(string(m[1]))
		return true, nil
	}); err != nil {
		return row{}, err
	}
	if synced < objects {
		return row{}, fmt.Errorf("the restarted syncer synced %d objects, not the %d in its mailbox", synced, objects)
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return row{}, err
	}
	if syncer.exited() {
		return row{}, errors.New("the restarted syncer exited")
	}
	mem, err := procMemory(syncer.cmd.Process.Pid)
	if err != nil {
		return row{}, err
	}
	return row{"syncer idle RSS (VmRSS), binary read from disk", mib(mem["VmRSS"]),
		fmt.Sprintf("RssAnon %s, RssFile %s; restarted from a copy of the binary evicted from the page cache (%.0f %% of it resident at the start), "+
			"as on an edge after a boot; 5 s after its first sync of %d objects; target ≤ 40 MB",
			mib(mem["RssAnon"]), mib(mem["RssFile"]), 100*resident, synced)}, nil
}

// coldCopy copies the executable bin into dir and asks the kernel to drop
// the copy from the page cache (posix_fadvise DONTNEED once it is on
// disk). It returns the copy's path and the fraction of its pages still
// resident, by mincore(2).
func coldCopy(bin, dir string) (string, float64, error) {
	src, err := os.Open(bin)
	if err != nil {
		return "", 0, err
	}
	defer src.Close()
	dst := filepath.Join(dir, "kubestellar-cold")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return "", 0, err
	}
	_, err = io.Copy(out, src)
	if err == nil {
		err = out.Sync()
	}
	if err == nil {
		err = unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED)
	}
	if closeErr := out.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return "", 0, fmt.Errorf("copying %s to %s: %w", bin, dst, err)
	}
	resident, err := residentFraction(dst)
	if err != nil {
		return "", 0, err
	}
	return dst, resident, nil
}

// residentFraction is the fraction of a file's pages in the page cache.
func residentFraction(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mmap %s: %w", path, err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, fmt.Errorf("mincore %s: %w", path, errno)
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec)), nil
}

// placeWorkload makes the namespace, the Gauge CRD (established) and the
// EdgePlacement in the WDS.
func placeWorkload(ctx context.Context, syncer *syncerProcess, wds kubernetes.Interface, wdsDyn dynamic.Interface) error {
	if _, err := wds.CoreV1().Namespaces().Create(ctx, namespace(syncNS), metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := wdsDyn.Resource(crdsGVR).Create(ctx, gaugeCRDObject(), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := syncer.poll(ctx, time.Minute, "the Gauge CRD to be established in the WDS", func(ctx context.Context) (bool, error) {
		crd, err := wdsDyn.Resource(crdsGVR).Get(ctx, gaugeCRD, metav1.GetOptions{})
		return err == nil && established(crd), nil
	}); err != nil {
		return err
	}
	ep := &edgev2alpha1.EdgePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "EdgePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: edgev2alpha1.EdgePlacementSpec{
			LocationSelectors:          []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "bench"}}},
			WantSingletonReportedState: true,
			Downsync: []edgev2alpha1.DownsyncClause{
				{APIGroup: ptr.To(crdsGVR.Group), Resources: []string{crdsGVR.Resource}, ObjectNames: []string{gaugeCRD}},
				{APIGroup: ptr.To(""), Resources: []string{"namespaces"}, ObjectNames: []string{syncNS}},
				{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{syncNS}},
				{APIGroup: ptr.To(gaugesGVR.Group), Resources: []string{gaugesGVR.Resource}, Namespaces: []string{syncNS}},
			},
		},
	}
	u, err := toUnstructured(ep)
	if err != nil {
		return err
	}
	_, err = wdsDyn.Resource(epGVR).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// gaugeCRDObject is a namespaced CRD with a status subresource whose
// status.value is an integer.
func gaugeCRDObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": gaugeCRD},
		"spec": map[string]any{
			"group": gaugesGVR.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "gauges", "singular": "gauge", "kind": gaugeKind, "listKind": gaugeKind + "List"},
			"versions": []any{map[string]any{
				"name": gaugesGVR.Version, "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
						// Beside value, the syncer may add conditions.
						"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
							"properties": map[string]any{"value": map[string]any{"type": "integer"}}},
					},
				}},
			}},
		},
	}}
}

func gaugeName(i int) string { return fmt.Sprintf("gauge-%03d", i) }

func gauge(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gaugesGVR.GroupVersion().String(),
		"kind":       gaugeKind,
		"metadata":   map[string]any{"name": gaugeName(i), "namespace": syncNS},
		"spec":       map[string]any{"unit": "bench"},
	}}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// paced calls fn for 0..n-1 at a steady rate per second (fn's own time
// included), so that latencies measure the path and not a queue. It
// returns how long the n calls took.
func paced(ctx context.Context, n int, rate float64, fn func(i int) error) (time.Duration, error) {
	interval := time.Duration(float64(time.Second) / rate)
	began := time.Now()
	for i := range n {
		if d := time.Until(began.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(d):
			}
		}
		if err := fn(i); err != nil {
			return 0, err
		}
	}
	return time.Since(began), nil
}

// allowedRate is the rate that perObject, the CPU time of every process per
// object, allows on this machine's cores, which they all share.
func allowedRate(perObject time.Duration) string {
	if perObject <= 0 {
		return "no CPU time counted"
	}
	return fmt.Sprintf("on %d cores shared by them all, at most %.0f objects/s end to end", runtime.NumCPU(), float64(runtime.NumCPU())/perObject.Seconds())
}

// burstRun is what one burst of the syncer section measured.
type burstRun struct {
	// took is how long the creates took.
	took time.Duration
	// edge and center are each create's latency to the edge cluster and
	// to the mailbox.
	edge, center []time.Duration
	// cpu is each group's CPU per object.
	cpu cpuPerOp
}

// burstRows are the bursts' rows: each figure of one burst, or over
// several its median, with the min and max (the CPU of each process
// apart: the medians alone).
func burstRows(o syncerOptions, runs []burstRun) []row {
	// over shows a duration of each run.
	over := func(fig func(burstRun) time.Duration, format func(time.Duration) string) string {
		ds := make([]time.Duration, len(runs))
		for i, r := range runs {
			ds[i] = fig(r)
		}
		return durationSpread(ds).show(asDuration(format))
	}
	p := func(ds func(burstRun) []time.Duration, p int) func(burstRun) time.Duration {
		return func(r burstRun) time.Duration { return percentile(ds(r), p) }
	}
	edge := func(r burstRun) []time.Duration { return r.edge }
	center := func(r burstRun) []time.Duration { return r.center }
	cpu := func(group string) time.Duration {
		ds := make([]time.Duration, len(runs))
		for i, r := range runs {
			ds[i] = r.cpu[group]
		}
		return time.Duration(durationSpread(ds).median)
	}
	rates := make([]float64, len(runs))
	total := make([]time.Duration, len(runs))
	p99 := make([]time.Duration, len(runs))
	for i, r := range runs {
		rates[i] = float64(o.burstObjects) / r.took.Seconds()
		total[i] = r.cpu.total()
		p99[i] = percentile(r.edge, 99)
	}
	totalCPU := durationSpread(total)
	perProcess := "utime+stime of each process from the first create to the last copy at the edge ÷ objects (the bench: its creates and watches)"
	if len(runs) > 1 {
		perProcess += fmt.Sprintf("; medians of %d runs", len(runs))
	}
	what := fmt.Sprintf("syncer: WDS create → edge ADDED at %g creates/s", o.burstRate)
	return []row{
		{what + " p50", over(p(edge, 50), ms), fmt.Sprintf("%d ConfigMaps created in %s (%s achieved; up to %d creates in flight), one edge cluster",
			o.burstObjects, over(func(r burstRun) time.Duration { return r.took }, func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }),
			spreadOf(rates).show(func(v float64) string { return fmt.Sprintf("%.0f/s", v) }), burstInFlight)},
		{what + " p99", over(p(edge, 99), ms), "target ≤ 1 s" + durationSpread(p99).judged()},
		{what + " max", over(p(edge, 100), ms), ""},
		{fmt.Sprintf("syncer: of which WDS create → mailbox copy at %g creates/s, p50 / p99", o.burstRate),
			over(p(center, 50), ms) + " / " + over(p(center, 99), ms), "the center's part: the placement translator"},
		{"syncer: CPU per object of the burst: server / syncer / edge cluster / bench",
			fmt.Sprintf("%s / %s / %s / %s", msCPU(cpu("server")), msCPU(cpu("syncer")), msCPU(cpu("edge cluster")), msCPU(cpu("bench"))), perProcess},
		{"syncer: CPU per object of the burst, every process", totalCPU.show(asDuration(msCPU)), allowedRate(time.Duration(totalCPU.median))},
	}
}

// burstInFlight bounds the creates pacedConcurrent has waiting on the
// server in the syncer section's burst.
const burstInFlight = 64

// pacedConcurrent starts fn for 0..n-1 at a steady rate per second,
// whatever fn's own time (open loop: a slow answer does not delay the next
// start), with at most inFlight running at once. It returns how long the n
// calls took, or the first error once those running are done.
func pacedConcurrent(ctx context.Context, n int, rate float64, inFlight int, fn func(i int) error) (time.Duration, error) {
	interval := time.Duration(float64(time.Second) / rate)
	began := time.Now()
	slots := make(chan struct{}, inFlight)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i := range n {
		if d := time.Until(began.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return 0, ctx.Err()
			case <-time.After(d):
			}
		}
		slots <- struct{}{}
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := fn(i); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return time.Since(began), nil
}

// arrivals records when a watch first delivered each name that match
// accepts.
type arrivals struct {
	mu    sync.Mutex
	first map[string]time.Time
	ended chan struct{} // closed when the watch ends
}

// configMapAdded matches a ConfigMap's ADDED event, by name.
func configMapAdded(ev watch.Event) (string, bool) {
	if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added {
		return cm.Name, true
	}
	return "", false
}

func collect(w watch.Interface, match func(watch.Event) (string, bool)) *arrivals {
	a := &arrivals{first: map[string]time.Time{}, ended: make(chan struct{})}
	go func() {
		defer close(a.ended)
		for ev := range w.ResultChan() {
			at := time.Now()
			if name, ok := match(ev); ok {
				a.mu.Lock()
				if _, seen := a.first[name]; !seen {
					a.first[name] = at
				}
				a.mu.Unlock()
			}
		}
	}()
	return a
}

// wait waits until every name in sent has arrived and returns the
// latencies, giving up after a minute without progress.
func (a *arrivals) wait(ctx context.Context, sent map[string]time.Time, syncer *syncerProcess, progress func(string, ...any), what string) ([]time.Duration, error) {
	count := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		n := 0
		for name := range sent {
			if _, ok := a.first[name]; ok {
				n++
			}
		}
		return n
	}
	last, lastChange, lastReport := -1, time.Now(), time.Now()
	for {
		n := count()
		if n == len(sent) {
			break
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		switch {
		case time.Since(lastChange) > time.Minute:
			return nil, fmt.Errorf("%d of %d %s, none more for a minute", n, len(sent), what)
		case syncer.exited():
			return nil, fmt.Errorf("the syncer exited with %d of %d %s", n, len(sent), what)
		case time.Since(lastReport) > 10*time.Second:
			progress("syncer: %d of %d %s", n, len(sent), what)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-a.ended:
			return nil, fmt.Errorf("the watch ended with %d of %d %s", count(), len(sent), what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]time.Duration, 0, len(sent))
	for name, at := range sent {
		out = append(out, max(0, a.first[name].Sub(at)))
	}
	return out, nil
}

// syncerProcess is `kubestellar syncer join` running as a child process.
type syncerProcess struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func startSyncer(bin string, joinArgs []string, edgeKubeconfig, dataDir string) (*syncerProcess, error) {
	logPath := filepath.Join(dataDir, "syncer.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, joinArgs...), "--kubeconfig", edgeKubeconfig, "--data-dir", dataDir, "--heartbeat-interval", "2s")
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// If the bench dies, so does the syncer.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting the syncer: %w", err)
	}
	p := &syncerProcess{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(p.done) }()
	return p, nil
}

func (p *syncerProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits, killing the syncer after 30 s.
func (p *syncerProcess) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tailFile returns the last n bytes of a file, or "" if it cannot be read.
func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// poll checks cond until it holds, failing after timeout or as soon as the
// syncer exits.
func (p *syncerProcess) poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, errors.New("the syncer exited")
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// cli runs one of the binary's client commands with the server's admin
// kubeconfig and returns its stdout.
func (s *server) cli(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(s.dataDir, "admin.kubeconfig"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubestellar %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// procMemory reads the resident-memory lines of /proc/PID/status, in bytes.
func procMemory(pid int) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" || !strings.HasPrefix(f[0], "Rss") && f[0] != "VmRSS:" && f[0] != "VmHWM:" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/status: %s: %w", pid, line, err)
		}
		out[strings.TrimSuffix(f[0], ":")] = kb * 1024
	}
	if _, ok := out["VmRSS"]; !ok {
		return nil, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
	}
	return out, nil
}

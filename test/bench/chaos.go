// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// The chaos test: one SQLite server propagates objects × targets copies;
// when a fraction of them are made it is killed with SIGKILL (no shutdown,
// no checkpoint), started again on the same data dir and port, and given
// time to converge. It passes when every mailbox is exact (exact.go: each
// copy there once, with the content the translator makes, nothing extra)
// and still is a little later.

const (
	chaosInv  = "bench-chaos-inv"
	chaosWDS  = "bench-chaos-wds"
	chaosNS   = "chaos"
	chaosHold = 15 * time.Second // how long the mailboxes must stay exact
)

// chaosOptions configures the chaos test.
type chaosOptions struct {
	on       bool
	objects  int
	targets  int
	killAt   float64       // fraction of the copies made when the server is killed
	converge time.Duration // how long the restarted server may take
}

func chaosRun(ctx context.Context, bin string, o chaosOptions) (rows []row, err error) {
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...) }
	if o.objects <= 0 || o.targets <= 0 || o.killAt <= 0 || o.killAt >= 1 {
		return nil, errors.New("chaos: need -chaos-objects > 0, -chaos-targets > 0 and 0 < -chaos-kill-at < 1")
	}
	s, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	current := s
	defer func() {
		current.stop()
		if err == nil {
			os.RemoveAll(s.dataDir)
			return
		}
		err = fmt.Errorf("%w\n(the server's data dir and logs are kept in %s)\n--- end of the server's log ---\n%s", err, s.dataDir,
			tailFile(filepath.Join(s.dataDir, "server.log"), 3000))
	}()
	want := o.objects * o.targets
	progress("server pid %d, data dir %s; %d objects × %d SyncTargets = %d copies, kill -9 at %.0f %%",
		s.cmd.Process.Pid, s.dataDir, o.objects, o.targets, want, 100*o.killAt)

	for _, args := range [][]string{{chaosInv, "--type", "inventory"}, {chaosWDS, "--type", "wds", "--inventory-space", chaosInv}} {
		if _, err := s.cli(ctx, bin, append([]string{"space", "create"}, append(args, "--no-context")...)...); err != nil {
			return nil, err
		}
	}
	wds := kubernetes.NewForConfigOrDie(s.config(chaosWDS))
	if _, err := wds.CoreV1().Namespaces().Create(ctx, namespace(chaosNS), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := parallel(16, o.objects, func(i int) error {
		cm := configMap(fmt.Sprintf("obj-%04d", i))
		cm.Labels = map[string]string{"app": "chaos"}
		cm.Data["index"] = fmt.Sprint(i)
		_, err := wds.CoreV1().ConfigMaps(chaosNS).Create(ctx, cm, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	progress("creating %d SyncTargets and Locations", o.targets)
	inv := dynamic.NewForConfigOrDie(s.config(chaosInv))
	if _, err := parallel(16, o.targets, func(i int) error {
		name := simulatedName(i)
		if _, err := inv.Resource(stGVR).Create(ctx, obj("SyncTarget", name, map[string]any{"name": name}, nil), metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := inv.Resource(locationsGVR).Create(ctx, obj("Location", name, map[string]any{"env": "chaos"}, map[string]any{
			"resource":         map[string]any{"group": edgev2alpha1.GroupName, "version": "v2alpha1", "resource": "synctargets"},
			"instanceSelector": map[string]any{"matchLabels": map[string]any{"name": name}},
		}), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	// A SyncTarget names its mailbox as it is stored: the spaces say
	// when they are made.
	if err := mailboxesReady(ctx, dynamic.NewForConfigOrDie(s.config(spaces.Root)), o.targets); err != nil {
		return nil, err
	}

	// Count copies as they appear, with one watch across all spaces.
	wildcard := rest.CopyConfig(s.config(spaces.Root))
	wildcard.Host += spaces.PathPrefix + spaces.Wildcard
	w, err := kubernetes.NewForConfigOrDie(wildcard).CoreV1().ConfigMaps("").Watch(ctx,
		metav1.ListOptions{LabelSelector: edgev2alpha1.PlacementCopyLabel + "=true"})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	ep := &edgev2alpha1.EdgePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "EdgePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: "chaos"},
		Spec: edgev2alpha1.EdgePlacementSpec{
			LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "chaos"}}},
			Downsync:          []edgev2alpha1.DownsyncClause{{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{chaosNS}}},
		},
	}
	u, err := toUnstructured(ep)
	if err != nil {
		return nil, err
	}
	killAt := int(o.killAt * float64(want))
	progress("placing; kill -9 once %d of %d copies are made", killAt, want)
	placed := time.Now()
	if _, err := dynamic.NewForConfigOrDie(s.config(chaosWDS)).Resource(epGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for len(seen) < killAt {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, fmt.Errorf("the watch of copies ended after %d of %d", len(seen), want)
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added {
				seen[cm.Annotations[spaces.Annotation]+"/"+cm.Name] = true
			}
		case <-time.After(5 * time.Minute):
			return nil, fmt.Errorf("only %d of %d copies after 5 minutes without progress", len(seen), want)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return nil, fmt.Errorf("kill -9 of the server: %w", err)
	}
	killed := time.Now()
	<-s.done
	w.Stop()
	madeAtKill := len(seen)
	progress("killed (SIGKILL) %s after placing, with %d of %d copies seen made", killed.Sub(placed).Round(time.Millisecond), madeAtKill, want)

	if err := os.Rename(filepath.Join(s.dataDir, "server.log"), filepath.Join(s.dataDir, "server.before-kill.log")); err != nil {
		return nil, err
	}
	s2, err := startOn(ctx, bin, s.dataDir, s.port, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("restarting on the same data dir: %w", err)
	}
	current = s2
	ready := time.Now()
	progress("restarted, ready %s after the kill; waiting until every mailbox is exact (at most %s)", ready.Sub(killed).Round(time.Millisecond), o.converge)
	x := exactness{gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), inventory: chaosInv, wds: chaosWDS}
	f, counts, took, err := converge(ctx, s2, x, o.converge, progress)
	if err != nil {
		return nil, err
	}
	converged := f.total() == 0
	held, heldCounts := findings{}, counts
	if converged {
		progress("exact %s after ready; checking that it stays so for %s", took.Round(time.Millisecond), chaosHold)
		if err := sleep(ctx, chaosHold); err != nil {
			return nil, err
		}
		if held, heldCounts, err = x.check(ctx, s2); err != nil {
			return nil, err
		}
	}

	what := fmt.Sprintf("%d objects × %d SyncTargets", o.objects, o.targets)
	rows = []row{
		{"chaos: copies expected (" + what + ")", itoa(int64(counts.expected)), ""},
		{"chaos: copies seen made before the kill -9", fmt.Sprintf("%d (%.0f %%)", madeAtKill, 100*float64(madeAtKill)/float64(want)), killed.Sub(placed).Round(time.Millisecond).String() + " after placing"},
		{"chaos: after the restart: found, missing, extra, duplicated, unlike the translator's", fmt.Sprintf("%d, %d, %d, %d, %d", counts.found, counts.missing, counts.extra, counts.duplicated, counts.unlike), ""},
		{"chaos: other unreconciled (namespaces, mailboxes)", itoa(int64(f.total() - counts.missing - counts.extra - counts.duplicated - counts.unlike)), ""},
		{"chaos: kill -9 → ready", long(ready.Sub(killed)), ""},
	}
	switch {
	case !converged:
		rows = append(rows, row{"chaos: ready → every mailbox exact", "not within " + o.converge.String(), ""})
		return append(rows, row{"chaos: verdict", "failed", ""}),
			&verdictError{fmt.Errorf("chaos failed: %d unreconciled %s after the restart:%s", f.total(), o.converge, f)}
	case held.total() > 0:
		rows = append(rows, row{"chaos: ready → every mailbox exact", long(took), fmt.Sprintf("but %d unreconciled %s later", held.total(), chaosHold)})
		return append(rows, row{"chaos: verdict", "failed", ""}),
			&verdictError{fmt.Errorf("chaos failed: exact once, but %d unreconciled %s later:%s", held.total(), chaosHold, held)}
	}
	rows = append(rows, row{"chaos: ready → every mailbox exact", long(took), fmt.Sprintf("still exact %s later (%d copies)", chaosHold, heldCounts.found)})
	return append(rows, row{"chaos: verdict", "passed", "every mailbox exact after kill -9 and restart"}), nil
}

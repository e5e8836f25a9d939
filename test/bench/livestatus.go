// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The live edges section's status measurement: issue 53's "every edge
// reports its objects' status once → every WDS summary (CombinedStatus)
// final". The section places -live-objects Deployments on every live edge
// under a placement naming a StatusCollector that counts the edges where
// each is available. The edge clusters in memory have no controllers, so
// the Deployments have no status there and the count stays 0; then the
// bench tells every simulator to play the edges' controllers once (a line
// on its standard input), each edge cluster gives every Deployment an
// available status through its own API, every syncer reports it into its
// mailbox as it would a real cluster's, and the bench times the
// summaries until every CombinedStatus counts every edge.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/test/memedge"
)

const (
	// liveStatusNamespace holds the Deployments whose status is summarized.
	liveStatusNamespace = "live-status"
	// liveCollector is the StatusCollector counting the edges where each
	// Deployment is available, and liveStatusPlacement the placement
	// naming it.
	liveCollector       = "available"
	liveStatusPlacement = "live-status"
	// simPlayStatus is the line that has a simulator play its edges'
	// controllers once.
	simPlayStatus = "status"
)

var (
	deploymentsGVR    = appsv1.SchemeGroupVersion.WithResource("deployments")
	combinedStatusGVR = edgev2alpha1.SchemeGroupVersion.WithResource("combinedstatuses")
	collectorsGVR     = edgev2alpha1.SchemeGroupVersion.WithResource("statuscollectors")
)

// statusPlayer is, in a simulator, its edges' controllers for the status
// measurement: it counts the Deployments of liveStatusNamespace its edge
// clusters hold and, told to, gives each an available status.
type statusPlayer struct {
	clusters []*memedge.Cluster
	// held is how many Deployments of liveStatusNamespace the clusters
	// hold; set how many the player has given a status; doneAt when it
	// last finished (Unix ns).
	held, set, doneAt atomic.Int64
}

// onChange counts the Deployments (a memedge.Cluster's OnChange).
func (p *statusPlayer) onChange(gvr schema.GroupVersionResource, typ watch.EventType, obj *unstructured.Unstructured) {
	if gvr != deploymentsGVR || obj.GetNamespace() != liveStatusNamespace {
		return
	}
	switch typ {
	case watch.Added:
		p.held.Add(1)
	case watch.Deleted:
		p.held.Add(-1)
	}
}

// serve plays the controllers each time in says simPlayStatus, until in
// ends or ctx does.
func (p *statusPlayer) serve(ctx context.Context, in io.Reader, errs func(error)) {
	lines := bufio.NewScanner(in)
	for lines.Scan() && ctx.Err() == nil {
		if strings.TrimSpace(lines.Text()) != simPlayStatus {
			continue
		}
		if err := p.play(ctx); err != nil {
			errs(err)
		}
	}
}

// play gives every Deployment of liveStatusNamespace in every cluster the
// status its controller would once its replicas are available, through
// the cluster's API, as the cluster's controller writes it.
func (p *statusPlayer) play(ctx context.Context) error {
	_, err := parallel(8, len(p.clusters), func(i int) error {
		client, err := dynamic.NewForConfig(p.clusters[i].Config())
		if err != nil {
			return err
		}
		rc := client.Resource(deploymentsGVR).Namespace(liveStatusNamespace)
		list, err := rc.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("edge %d: listing its Deployments: %w", i, err)
		}
		for j := range list.Items {
			d := &list.Items[j]
			d.Object["status"] = availableStatus(d)
			if _, err := rc.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("edge %d: the status of %s: %w", i, d.GetName(), err)
			}
			p.set.Add(1)
		}
		return nil
	})
	p.doneAt.Store(time.Now().UnixNano())
	return err
}

// availableStatus is what the deployment controller writes of a
// Deployment whose replicas are all up to date and available.
func availableStatus(d *unstructured.Unstructured) map[string]any {
	replicas, found, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	return map[string]any{
		"observedGeneration": d.GetGeneration(),
		"replicas":           replicas, "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
		"conditions": []any{map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
			"message": "Deployment has minimum availability.", "lastTransitionTime": now, "lastUpdateTime": now}},
	}
}

// liveStatusObjects creates, in the WDS, liveStatusNamespace with m
// Deployments, the StatusCollector counting the edges where each is
// available, and the placement of them on every live edge naming it.
func liveStatusObjects(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, m int) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace(liveStatusNamespace), metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range m {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%03d", i)},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%03d", i)}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": fmt.Sprintf("app-%03d", i)}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		if _, err := kube.AppsV1().Deployments(liveStatusNamespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	filter := edgev2alpha1.Expression("has(returned.status.availableReplicas) && returned.status.availableReplicas >= obj.spec.replicas")
	sc := &edgev2alpha1.StatusCollector{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "StatusCollector"},
		ObjectMeta: metav1.ObjectMeta{Name: liveCollector},
		Spec: edgev2alpha1.StatusCollectorSpec{Filter: &filter, Limit: 20,
			CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "edges", Type: edgev2alpha1.AggregationCount}}},
	}
	ep := placementObject(liveStatusPlacement, map[string]string{"env": "live"}, edgev2alpha1.DownsyncClause{
		APIGroup: ptr.To(appsv1.GroupName), Resources: []string{"deployments"}, Namespaces: []string{liveStatusNamespace},
		StatusCollectors: []string{liveCollector}})
	ep.Spec.WantSingletonReportedState = false
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj any
	}{{collectorsGVR, sc}, {epGVR, ep}} {
		u, err := toUnstructured(o.obj)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(o.gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", u.GetKind(), err)
		}
	}
	return nil
}

// availableCount is the count a CombinedStatus of liveStatusPlacement
// holds for liveCollector, and whether it holds one.
func availableCount(u *unstructured.Unstructured) (int64, bool) {
	var cs edgev2alpha1.CombinedStatus
	data, err := json.Marshal(u.Object)
	if err != nil || json.Unmarshal(data, &cs) != nil {
		return 0, false
	}
	for _, r := range cs.Results {
		if r.Name != liveCollector || len(r.Rows) != 1 || len(r.Rows[0].Columns) != 1 {
			continue
		}
		var n int64
		if json.Unmarshal(r.Rows[0].Columns[0].Raw, &n) == nil {
			return n, true
		}
	}
	return 0, false
}

// summaries is the bench's watch of the CombinedStatuses of
// liveStatusPlacement in the WDS, as a user's kubectl get -w would hold
// it: waiting on it costs the measured server an event per summary
// written, where a LIST each poll would cost it every summary each time.
type summaries struct{ store cache.Store }

func watchSummaries(ctx context.Context, dyn dynamic.Interface) (*summaries, error) {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, combinedStatusGVR, liveStatusNamespace, 0, cache.Indexers{}, nil).Informer()
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("watching the CombinedStatuses: %w", ctx.Err())
	}
	return &summaries{store: inf.GetStore()}, nil
}

// at counts the summaries whose count is want.
func (s *summaries) at(want int64) int {
	final := 0
	for _, obj := range s.store.List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if n, ok := availableCount(u); ok && n == want {
				final++
			}
		}
	}
	return final
}

// liveStatusMeasure is the status measurement on the live fleet: the
// Deployments placed (unmeasured but for the time they take), then every
// edge's report of their status, once, until every summary is final.
func liveStatusMeasure(ctx context.Context, f *liveFleet, o liveOptions, progress func(string, ...any)) ([]row, error) {
	n, m := o.edges, o.objects
	s, sim := f.s, f.sim
	pid := s.cmd.Process.Pid
	kube := kubernetes.NewForConfigOrDie(s.config(liveWDS))
	dyn := dynamic.NewForConfigOrDie(s.config(liveWDS))

	progress("placing %d Deployments on the %d live edges, summarized by a StatusCollector", m, n)
	placed := time.Now()
	if err := liveStatusObjects(ctx, kube, dyn, m); err != nil {
		return nil, err
	}
	if err := sim.wait(ctx, 30*time.Minute, fmt.Sprintf("%d Deployments in the edge clusters", m*n), progress,
		func(r simReport) int { return int(r.Deployments) }, m*n); err != nil {
		return nil, err
	}
	placeTook := time.Since(placed)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	sums, err := watchSummaries(wctx, dyn)
	if err != nil {
		return nil, err
	}
	// Each Deployment's summary, counting no edge: none has a status at
	// its edge yet. Then the server at rest, so that what follows is the
	// reports' alone.
	if err := pollProgress(ctx, 10*time.Minute, fmt.Sprintf("%d CombinedStatuses counting no edge", m), progress,
		func(context.Context) (int, error) { return sums.at(0), nil }, m); err != nil {
		return nil, err
	}
	settled, err := settle(ctx, pid, 2*time.Minute)
	if err != nil {
		return nil, err
	}

	progress("every edge reports its %d Deployments available, once", m)
	printRequests, err := requestsSince(ctx, s, progress)
	if err != nil {
		return nil, err
	}
	sim.takeLag()
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	if f.profiles != "" {
		// The server summarizing: 30 s from the first report.
		wait, err := cpuProfile(ctx, s, filepath.Join(f.profiles, "live-status-cpu.pb.gz"))
		if err != nil {
			return nil, err
		}
		defer wait()
	}
	began := time.Now()
	if err := sim.tell(simPlayStatus); err != nil {
		return nil, err
	}
	if err := pollProgress(ctx, 10*time.Minute, fmt.Sprintf("%d CombinedStatuses counting all %d edges", m, n), progress,
		func(ctx context.Context) (int, error) {
			if err := sim.alive(); err != nil {
				return 0, err
			}
			return sums.at(int64(n)), nil
		}, m); err != nil {
		printRequests("the unfinished reports")
		return nil, err
	}
	took := time.Since(began)
	printRequests("the reports")
	cpu1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	lag := sim.takeLag()
	// The simulators report once a second: the summaries can be final
	// before their last report says the writes ended.
	if err := sim.wait(ctx, time.Minute, fmt.Sprintf("%d statuses written at the edges", m*n), progress, func(r simReport) int {
		if r.StatusAt < began.UnixNano() {
			return min(int(r.StatusSet), m*n-1)
		}
		return int(r.StatusSet)
	}, m*n); err != nil {
		return nil, err
	}
	wrote := time.Unix(0, sim.report().StatusAt).Sub(began)
	note := fmt.Sprintf("%d statuses written at the edges (the simulators playing the edge clusters' controllers) in %s, the last summary final %s after the last of them; "+
		"until each Deployment's CombinedStatus counts all %d edges available; the simulated edges ran up to %s late; target ≤ 2 min for 100 objects × 10,000 live edges",
		m*n, long(wrote), long(took-wrote), n, long(lag))
	if !settled {
		note += "; the server had not settled under 10 % of a core after 2 min"
	}
	return []row{
		{fmt.Sprintf("status: %d Deployments × %d live edges placed", m, n), long(placeTook),
			fmt.Sprintf("under a placement naming a StatusCollector (%s: a COUNT of the edges where the Deployment is available), until every edge cluster holds all", liveCollector)},
		{fmt.Sprintf("status: every edge reports its %d objects once → every CombinedStatus final", m), long(took), note},
		{"status: server CPU per report", fmt.Sprintf("%d µs", (cpu1-cpu0).Microseconds()/int64(max(1, m*n))),
			"utime+stime of the server from the first report until every summary was final ÷ reports (one per copy)"},
	}, nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The HA section: the live fleet (liveedges.go) spread over servers that
// share one PostgreSQL through kine, and one of them killed with SIGKILL.
//
// Every server serves every edge: the SyncTargets, mailboxes and copies
// are in the one datastore, and a syncer given the cluster's servers
// (--server a,b,c) uses the first it can reach. Each simulated edge is
// given them beginning with another, so that each server holds a third of
// the tunnels. The controllers run on one server, the holder of their
// Lease. The section kills that server, the worst case: its edges lose
// their tunnels and its controllers stop in the middle of whatever they
// did. A change is made through a survivor at the kill, and the section
// times, from the kill: a survivor leading; every edge of the dead server
// connected to a survivor (its SyncTarget SyncerConnected, naming the
// survivor); every edge answering through its tunnel (a GET through one
// survivor's edge proxy, which forwards to the other when that one holds
// the tunnel); every edge cluster holding the change; and every mailbox
// exact (exact.go). The goal is every mailbox exact within 2 minutes.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	ksserver "github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// haServers is how many servers share the datastore.
const haServers = 3

// haGoal is the goal of the kill's rows.
const haGoal = "target ≤ 2 min for 10,000 live edges on 3 servers"

// haSection names the section by its fleet.
func haSection(o liveOptions) string {
	return o.section(fmt.Sprintf("HA, %d servers on PostgreSQL", haServers))
}

func haBench(ctx context.Context, bin string, o liveOptions, progress func(string, ...any)) ([]row, error) {
	progress = prefixed(progress, "HA: ")
	n := o.edges
	if err := raiseFileLimit(serverFilesPerEdge*n + 1024); err != nil {
		return nil, fmt.Errorf("%d live edges: %w", n, err)
	}
	progress("starting PostgreSQL and %d servers on it", haServers)
	pg, err := harness.NewPostgres(ctx)
	if err != nil {
		return nil, err
	}
	defer pg.Stop()
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	args := []string{"--datastore-endpoint", pg.DSN, "--token", hex.EncodeToString(secret)}
	var servers []*server
	for range haServers {
		// One at a time: the first makes the cluster's CA and token, which
		// the others find in the datastore.
		s, err := start(ctx, bin, "", args...)
		if err != nil {
			for _, s := range servers {
				s.stop()
				os.RemoveAll(s.dataDir)
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	f, err := fleetOn(ctx, bin, servers, o, progress)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	rows, err := haMeasure(ctx, f, o, progress)
	if err != nil {
		return nil, f.explain(ctx, err)
	}
	if o.profiles != "" {
		// Beside the profiles, what each process logged.
		progress("%s", strings.TrimPrefix(f.keepLogs(), "\n"))
	}
	return append([]row{
		{fmt.Sprintf("%d SyncTargets created → their mailboxes ready", n), long(f.mailboxes),
			fmt.Sprintf("through one server, with a Location and a join token each; %d servers on PostgreSQL 15 (fsync off), the controllers on one", haServers)},
		{fmt.Sprintf("%d syncers started → all connected", n), long(f.connected),
			fmt.Sprintf("each syncer given the %d servers, beginning with another; the simulators at nice %d", haServers, o.niceFor(n)) + o.startedNote(n)},
	}, rows...), nil
}

// haMeasure places the objects on the fleet, kills the leading server and
// times what follows.
func haMeasure(ctx context.Context, f *liveFleet, o liveOptions, progress func(string, ...any)) ([]row, error) {
	n, m := o.edges, o.objects
	s := f.s

	progress("placing %d ConfigMaps on the %d live edges (%d copies)", m, n, m*n)
	wds := kubernetes.NewForConfigOrDie(s.config(liveWDS))
	if err := createLiveObjects(ctx, wds, liveNamespace, m); err != nil {
		return nil, err
	}
	fanBegan := time.Now()
	if err := placeLive(ctx, s); err != nil {
		return nil, err
	}
	if err := f.sim.wait(ctx, 30*time.Minute, fmt.Sprintf("%d ConfigMaps in the edge clusters", m*n), progress,
		func(r simReport) int { return int(r.Objects[liveNamespace]) }, m*n); err != nil {
		return nil, err
	}
	fanTook := time.Since(fanBegan)
	if err := sleep(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	// A server that died under the load is not the one killed: say so,
	// with what it last logged (a 3,000-edge run lost one to kine's
	// compaction, which exits the process when a commit fails).
	for i, s := range f.servers {
		select {
		case <-s.done:
			return nil, fmt.Errorf("server %c (%s) exited before the kill: %v\n--- end of its log ---\n%s",
				'a'+i, s.url(), s.cmd.ProcessState, tailFile(filepath.Join(s.dataDir, "server.log"), 2000))
		default:
		}
	}
	var rss []string
	var rssSum int64
	for _, s := range f.servers {
		rss = append(rss, mib(s.rss()))
		rssSum += s.rss()
	}

	// Where each edge's tunnel is, just before the kill.
	tunnels, err := tunnelServers(ctx, f.inv)
	if err != nil {
		return nil, err
	}
	spread := countValues(tunnels)
	holder, err := leaseHolder(ctx, s)
	if err != nil {
		return nil, err
	}
	victim, survivors := splitLeader(holder, f.servers)
	if victim == nil {
		return nil, fmt.Errorf("no server of %d holds the controllers' Lease (held by %q)", len(f.servers), holder)
	}
	// What the survivors are asked through: the first of them.
	survivor := survivors[0]
	onVictim := spread[victim.url()]
	progress("killing the leading server (SIGKILL), which holds %d of the %d tunnels", onVictim, n)
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		return nil, err
	}
	<-victim.done

	// The change every edge must get through the survivors, made at once.
	changed, err := retryFor(ctx, 30*time.Second, func() error {
		wds := kubernetes.NewForConfigOrDie(survivor.config(liveWDS))
		probe, err := wds.CoreV1().ConfigMaps(liveNamespace).Get(ctx, liveProbe, metav1.GetOptions{})
		if err != nil {
			return err
		}
		probe.Data["v"] = "after-kill"
		_, err = wds.CoreV1().ConfigMaps(liveNamespace).Update(ctx, probe, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("changing the probe through a survivor: %w", err)
	}

	if o.profiles != "" {
		// The survivors taking over: 30 s from 15 s after the kill, when
		// one of them leads and their controllers start. The section
		// waits for them before it stops the servers.
		profiled := make(chan struct{})
		defer func() { <-profiled }()
		go func() {
			defer close(profiled)
			if sleep(ctx, 15*time.Second) != nil {
				return
			}
			for i, s := range survivors {
				if wait, err := cpuProfile(ctx, s, filepath.Join(o.profiles, fmt.Sprintf("ha-survivor-%d-cpu.pb.gz", i))); err == nil {
					defer wait()
				}
			}
		}()
	}

	inv := dynamic.NewForConfigOrDie(survivor.config(liveInv))
	shown := sampleDisconnected(ctx, inv, killed)
	defer shown.stop()

	// Each wait records when it was first true; they run together.
	const limit = 10 * time.Minute
	var leaderAt, movedAt, answerAt, changeAt, exactAt time.Duration
	var exactFindings findings
	var exactCounts mailboxCounts
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return pollPaced(gctx, limit, "a survivor to lead", func(ctx context.Context) (bool, error) {
			h, err := leaseHolder(ctx, survivor)
			if err != nil {
				return false, nil
			}
			leader, _ := splitLeader(h, survivors)
			if leader != nil {
				leaderAt = time.Since(killed)
			}
			return leader != nil, nil
		})
	})
	g.Go(func() error {
		var last string
		err := pollPaced(gctx, limit, "every edge connected to a survivor", func(ctx context.Context) (bool, error) {
			now, err := tunnelServers(ctx, inv)
			if err != nil {
				return false, nil
			}
			spread := countValues(now)
			on := 0
			for _, s := range survivors {
				on += spread[s.url()]
			}
			last = fmt.Sprintf("%d of %d", on, n)
			if on == n {
				movedAt = time.Since(killed)
			}
			return on == n, nil
		})
		if err != nil {
			return fmt.Errorf("%w (%s)", err, last)
		}
		return nil
	})
	g.Go(func() error {
		d, err := edgesAnswer(gctx, survivor, n, killed, progress)
		answerAt = d
		return err
	})
	g.Go(func() error {
		err := f.sim.wait(gctx, limit, fmt.Sprintf("%d edges with the change made at the kill", n), progress,
			func(r simReport) int { return r.Probe[probeKey(liveNamespace, "after-kill")] }, n)
		changeAt = time.Since(killed)
		return err
	})
	g.Go(func() error {
		x := exactness{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, inventory: liveInv, wds: liveWDS}
		var checkErr error
		err := pollPaced(gctx, limit, "every mailbox exact", func(ctx context.Context) (bool, error) {
			exactFindings, exactCounts, checkErr = x.check(ctx, survivor)
			if checkErr != nil {
				return false, nil
			}
			if exactFindings.total() == 0 && exactCounts.found == m*n {
				exactAt = time.Since(killed)
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("%w: %v %v", err, exactFindings, checkErr)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	most, lastNote, err := shown.finish(ctx, "the kill")
	if err != nil {
		return nil, err
	}
	// The change's arrival, at the edges that moved and at the others.
	var moved, stayed []time.Duration
	for i, at := range f.sim.arrivals(probeKey(liveNamespace, "after-kill")) {
		d := time.Unix(0, at).Sub(killed)
		if tunnels[simulatedName(i)] == victim.url() {
			moved = append(moved, d)
		} else {
			stayed = append(stayed, d)
		}
	}
	slices.Sort(moved)
	slices.Sort(stayed)
	arrivals := func(who string, ds []time.Duration) string {
		if len(ds) == 0 {
			return fmt.Sprintf("no edge %s", who)
		}
		return fmt.Sprintf("the %d edges %s: p50 %s, last %s", len(ds), who, long(percentile(ds, 50)), long(ds[len(ds)-1]))
	}
	var spreadNote []string
	for i, s := range f.servers {
		spreadNote = append(spreadNote, fmt.Sprintf("%c %d", 'a'+i, spread[s.url()]))
	}
	what := fmt.Sprintf("SIGKILL of the leading server (%d of %d edges on it)", onVictim, n)
	return []row{
		{"tunnels on each server", strings.Join(spreadNote, ", "), "from the SyncTargets' tunnelServer once all were connected"},
		{fmt.Sprintf("fan-out: %d ConfigMaps × %d live edges", m, n), long(fanTook),
			fmt.Sprintf("%d copies, from the placement until every edge cluster holds all; the controllers on one server, the edges' watches on all three", m*n)},
		{"servers' RSS after the fan-out", mib(rssSum), strings.Join(rss, " + ")},
		{what + " → a survivor leads", long(leaderAt), "the controllers' Lease taken over: it runs out 10 s after its last renewal"},
		{what + " → every edge on a survivor", long(movedAt), "every SyncTarget SyncerConnected, naming a survivor as its tunnelServer; " + haGoal},
		{what + " → every edge answers through its tunnel", long(answerAt), "a GET of each edge's /version through one survivor's edge proxy, forwarded to the other survivor when it holds the tunnel"},
		{what + " → the change made at the kill on every edge", long(changeAt), fmt.Sprintf("a ConfigMap changed through a survivor %s after the kill, until every edge cluster holds it; %s; %s",
			long(changed), arrivals("that moved", moved), arrivals("that stayed on a survivor", stayed))},
		{what + " → every mailbox exact", long(exactAt), fmt.Sprintf("%d copies, each once and as the translator makes it, the change included (exact.go); %s", exactCounts.found, haGoal)},
		{what + ": edges shown disconnected", fmt.Sprint(most), fmt.Sprintf("the most at any sample (every second from the kill until 5 s after all were back); %s", lastNote)},
	}, nil
}

// tunnelServers maps each SyncTarget shown SyncerConnected to the server
// it names as its tunnelServer.
func tunnelServers(ctx context.Context, inv dynamic.Interface) (map[string]string, error) {
	list, err := inv.Resource(stGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range list.Items {
		st := &list.Items[i]
		if !syncerConnected(st) {
			continue
		}
		out[st.GetName()], _, _ = unstructured.NestedString(st.Object, "status", "tunnelServer")
	}
	return out, nil
}

// countValues counts m's values.
func countValues(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

// leaseHolder is who holds the controllers' Lease, as s reads it.
func leaseHolder(ctx context.Context, s *server) (string, error) {
	kube, err := kubernetes.NewForConfig(s.config(spaces.Root))
	if err != nil {
		return "", err
	}
	lease, err := kube.CoordinationV1().Leases(ksserver.LeaseNamespace).Get(ctx, ksserver.LeaseName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// splitLeader returns the server that a Lease holder identity names
// (HOST_URL_SUFFIX: its base URL, then "_"), and the others.
func splitLeader(holder string, servers []*server) (*server, []*server) {
	i := slices.IndexFunc(servers, func(s *server) bool { return strings.Contains(holder, s.url()+"_") })
	if i < 0 {
		return nil, servers
	}
	return servers[i], slices.Delete(slices.Clone(servers), i, i+1)
}

// retryFor calls fn until it succeeds, for at most d, and returns how long
// that took.
func retryFor(ctx context.Context, d time.Duration, fn func() error) (time.Duration, error) {
	began := time.Now()
	for {
		err := fn()
		if err == nil {
			return time.Since(began), nil
		}
		if time.Since(began) > d {
			return 0, err
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// pollPaced calls ok until it says true, for at most limit: once a second, or
// after twice as long as ok itself took, whichever is longer. A poll that
// lists every SyncTarget or every copy costs the server it asks; paced so,
// it keeps that server busy for a third of one client's time at most, while
// the server recovers, rather than a client's whole time.
func pollPaced(ctx context.Context, limit time.Duration, what string, ok func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		start := time.Now()
		done, err := ok(ctx)
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not after %s", what, limit)
		}
		if err := sleep(ctx, pause(time.Since(start))); err != nil {
			return err
		}
	}
}

// pause is how long pollPaced waits after a poll that took took.
func pause(took time.Duration) time.Duration {
	return max(time.Second, 2*took)
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/tunnel"
)

// restartGoal is issue 53's goal for a restart under a live fleet.
const restartGoal = "target ≤ 60 s for 10,000 live edges"

// liveRestart restarts the server under the live fleet, as systemd does
// (SIGTERM, then a start on the same data and port), and measures the
// fleet coming back: every tunnel (a GET of each edge's /version through
// the server's edge proxy, which only its syncer's tunnel answers), every
// syncer's watch of its mailbox (a change made when the server is ready
// reaches every edge only through them), and the edges the server shows
// disconnected meanwhile, sampled each second. The fleet's server is the
// restarted one after.
func liveRestart(ctx context.Context, bin string, f *liveFleet, n int, progress func(string, ...any)) ([]row, error) {
	s := f.s
	progress("restarting the server (SIGTERM, then a start on the same data) under %d live edges", n)
	// Keep the first run's log: the restart starts a new one.
	if err := os.Rename(filepath.Join(s.dataDir, "server.log"), filepath.Join(s.dataDir, "server.before-restart.log")); err != nil {
		return nil, err
	}
	sigterm := time.Now()
	if err := s.terminate(time.Minute); err != nil {
		return nil, err
	}
	exited := time.Since(sigterm)
	if f.profiles != "" {
		// The server starting under its fleet: 30 s from 15 s after the
		// start (its address and admin are the old one's).
		go func() {
			if sleep(ctx, 15*time.Second) != nil {
				return
			}
			if wait, err := cpuProfile(ctx, s, filepath.Join(f.profiles, "live-restart-cpu.pb.gz")); err == nil {
				wait()
			}
		}()
	}
	s2, err := startOn(ctx, bin, s.dataDir, s.port, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	f.s, f.servers[0], f.inv = s2, s2, dynamic.NewForConfigOrDie(s2.config(liveInv))
	ready := time.Now()

	// The change every watch must bring: made at once.
	wds := kubernetes.NewForConfigOrDie(s2.config(liveWDS))
	probe, err := wds.CoreV1().ConfigMaps(liveNamespace).Get(ctx, liveProbe, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	probe.Data["v"] = "after-restart"
	if _, err := wds.CoreV1().ConfigMaps(liveNamespace).Update(ctx, probe, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}

	shown := sampleDisconnected(ctx, f.inv, sigterm)
	defer shown.stop()

	tunnelsBack, err := edgesAnswer(ctx, s2, n, sigterm, progress)
	if err != nil {
		return nil, err
	}
	if err := f.sim.wait(ctx, 5*time.Minute, fmt.Sprintf("%d edges with the change made after the restart", n), progress,
		func(r simReport) int { return r.Probe[probeKey(liveNamespace, "after-restart")] }, n); err != nil {
		return nil, err
	}
	watchesBack := time.Since(sigterm)
	most, lastNote, err := shown.finish(ctx, "SIGTERM")
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("restart with %d live edges", n)
	return []row{
		{what + ": SIGTERM → ready", long(ready.Sub(sigterm)), fmt.Sprintf("exit %s, start to ready %s", long(exited), long(s2.ready))},
		{what + ": SIGTERM → every tunnel back", long(tunnelsBack), "a GET of each edge's /version through the edge proxy; " + restartGoal},
		{what + ": SIGTERM → every watch back", long(watchesBack), "a ConfigMap changed when the server was ready, until every edge cluster holds it: every syncer's watch, and the translator's reconcile of every mailbox at its start before the change's; " + restartGoal},
		{what + ": edges shown disconnected", fmt.Sprint(most), fmt.Sprintf("the most at any sample (every second from ready until 5 s after all were back); %s; target: none for longer than the restart", lastNote)},
	}, nil
}

// edgesAnswer GETs each of n live edges' /version through the server's
// edge proxy until each answers, and returns when the last one did, from
// since.
func edgesAnswer(ctx context.Context, s *server, n int, since time.Time, progress func(string, ...any)) (time.Duration, error) {
	cfg := s.config(spaces.Root)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var last time.Time
	answered := 0
	_, err = parallel(32, n, func(i int) error {
		url := cfg.Host + tunnel.EdgesPrefix + liveInv + "/" + simulatedName(i) + "/proxy/version"
		deadline := time.Now().Add(5 * time.Minute)
		for {
			body, err := get(ctx, client, url)
			if err == nil && len(body) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("edge %s did not answer through its tunnel within 5 min of the restart: %v", simulatedName(i), err)
			}
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		last = time.Now()
		if answered++; answered%500 == 0 || answered == n {
			progress("%d of %d edges answer through their tunnels", answered, n)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return last.Sub(since), nil
}

// disconnectedSampling is disconnectedSamples running in the background.
type disconnectedSampling struct {
	disconnectedSamples
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sampleDisconnected samples inv's SyncTargets each second from now
// (disconnectedSamples), timing the last one shown from since, until
// finish or stop.
func sampleDisconnected(ctx context.Context, inv dynamic.Interface, since time.Time) *disconnectedSampling {
	s := &disconnectedSampling{}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Go(func() { s.run(ctx, inv, since) })
	return s
}

// stop ends the sampling and waits for it.
func (s *disconnectedSampling) stop() {
	s.cancel()
	s.wg.Wait()
}

// finish takes a last look 5 s on, for an edge shown disconnected once
// all are back, and stops: the most shown at any sample, and a note of
// when the last was shown, after what since was.
func (s *disconnectedSampling) finish(ctx context.Context, after string) (int, string, error) {
	if err := sleep(ctx, 5*time.Second); err != nil {
		return 0, "", err
	}
	s.stop()
	most, last := s.result()
	if most == 0 {
		return 0, "none at any sample", nil
	}
	return most, fmt.Sprintf("the last shown %s after %s", long(last), after), nil
}

// disconnectedSamples counts, each second, the SyncTargets shown
// disconnected, and keeps the most and when the last was seen.
type disconnectedSamples struct {
	mu   sync.Mutex
	most int
	last time.Duration // since the restart's SIGTERM
}

func (d *disconnectedSamples) run(ctx context.Context, inv dynamic.Interface, since time.Time) {
	for {
		if down, err := disconnected(ctx, inv); err == nil {
			d.mu.Lock()
			d.most = max(d.most, down)
			if down > 0 {
				d.last = time.Since(since)
			}
			d.mu.Unlock()
		}
		if sleep(ctx, time.Second) != nil {
			return
		}
	}
}

func (d *disconnectedSamples) result() (most int, last time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.most, d.last
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// datastoreFigures are one datastore's numbers.
type datastoreFigures struct {
	creates float64         // ConfigMap creates/s, 32 clients
	watch   []time.Duration // create → ADDED on a watch of the same server
	across  []time.Duration // create on one server → ADDED on another's watch
}

// external is a datastore that two servers share.
type external struct {
	name string
	note string
	// start starts it and returns the servers' flags and a stop function.
	start func(ctx context.Context, progress func(string, ...any)) (args []string, stop func(), err error)
}

var externals = []external{
	{"PostgreSQL", "PostgreSQL 15, fsync off", func(ctx context.Context, _ func(string, ...any)) ([]string, func(), error) {
		pg, err := harness.NewPostgres(ctx)
		if err != nil {
			return nil, nil, err
		}
		return []string{"--datastore-endpoint", pg.DSN}, pg.Stop, nil
	}},
	{"MySQL", "MariaDB 10.11, no log flush at commit", func(ctx context.Context, _ func(string, ...any)) ([]string, func(), error) {
		my, err := harness.NewMySQL(ctx)
		if err != nil {
			return nil, nil, err
		}
		return []string{"--datastore-endpoint", my.DSN}, my.Stop, nil
	}},
	{"etcd", "etcd 3.7, one member, TLS with client certificates, no fsync", func(ctx context.Context, progress func(string, ...any)) ([]string, func(), error) {
		e, err := harness.NewEtcd(ctx, func(format string, args ...any) { progress(format, args...) })
		if err != nil {
			return nil, nil, err
		}
		return e.ServerArgs(), e.Stop, nil
	}},
}

// datastoreBench compares SQLite (one server, the default) with each
// external datastore shared by two servers started with one --token: write
// throughput, create-to-watch latency on one server, and the latency from
// a create through one server to the event on a watch of the other.
func datastoreBench(ctx context.Context, bin string, n int, progress func(string, ...any)) ([]row, error) {
	samples := min(n/4, 200)
	acrossSamples := min(samples, 100)
	progress("datastores: SQLite, %d creates and %d watch samples", n, samples)
	sqlite, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(sqlite.dataDir)
	defer sqlite.stop()
	lite, err := measureDatastore(ctx, sqlite, nil, n, samples, 0)
	sqlite.stop()
	if err != nil {
		return nil, fmt.Errorf("SQLite: %w", err)
	}

	ratio := func(x, y float64) string { return fmt.Sprintf("%.2f", x/y) }
	p := func(ds []time.Duration, q int) time.Duration { return percentile(ds, q) }
	rows := []row{
		{"SQLite: creates/s", fmt.Sprintf("%.0f", lite.creates), fmt.Sprintf("%d ConfigMap creates, 32 clients; one server (the default)", n)},
		{"SQLite: create → watch p50", ms(p(lite.watch, 50)), fmt.Sprintf("%d sequential creates, watch on the same server", len(lite.watch))},
		{"SQLite: create → watch p99", ms(p(lite.watch, 99)), ""},
	}
	for _, ext := range externals {
		f, err := measureExternal(ctx, bin, ext, n, samples, acrossSamples, progress)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ext.name, err)
		}
		rows = append(rows,
			row{ext.name + ": creates/s", fmt.Sprintf("%.0f", f.creates), fmt.Sprintf("two servers, %s; %s / SQLite: %s", ext.note, ext.name, ratio(f.creates, lite.creates))},
			row{ext.name + ": create → watch p50", ms(p(f.watch, 50)), "same server; " + ext.name + " / SQLite: " + ratio(float64(p(f.watch, 50)), float64(p(lite.watch, 50)))},
			row{ext.name + ": create → watch p99", ms(p(f.watch, 99)), ""},
			row{ext.name + ": across servers p50", ms(p(f.across, 50)), fmt.Sprintf("create through one server, ADDED on a watch of the other; %d creates at random moments", len(f.across))},
			row{ext.name + ": across servers p99", ms(p(f.across, 99)), acrossNote(ext.name)},
		)
	}
	return rows, nil
}

// acrossNote says what bounds the latency across servers.
func acrossNote(name string) string {
	if name == "etcd" {
		return "etcd pushes events to every server's watches"
	}
	return "kine polls the database every second (fixed in kine); a write through the same server is pushed at once"
}

// measureExternal starts ext and two servers on it and measures them.
func measureExternal(ctx context.Context, bin string, ext external, n, samples, acrossSamples int, progress func(string, ...any)) (datastoreFigures, error) {
	progress("datastores: %s (two servers), %d creates, %d watch samples, %d across servers", ext.name, n, samples, acrossSamples)
	args, stop, err := ext.start(ctx, progress)
	if err != nil {
		return datastoreFigures{}, err
	}
	defer stop()
	args = append(args, "--token", "bench-cluster")
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
			os.RemoveAll(s.dataDir)
		}
	}()
	for range 2 {
		s, err := start(ctx, bin, "", args...)
		if err != nil {
			return datastoreFigures{}, err
		}
		servers = append(servers, s)
	}
	return measureDatastore(ctx, servers[0], servers[1], n, samples, acrossSamples)
}

// measureDatastore measures through server s (and, if other is set, from s
// to a watch on other).
func measureDatastore(ctx context.Context, s, other *server, n, samples, acrossSamples int) (datastoreFigures, error) {
	var f datastoreFigures
	kube := kubernetes.NewForConfigOrDie(s.config(spaces.Root))
	if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace("ds-throughput"), metav1.CreateOptions{}); err != nil {
		return f, err
	}
	took, err := parallel(32, n, func(i int) error {
		_, err := kube.CoreV1().ConfigMaps("ds-throughput").Create(ctx, configMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return f, err
	}
	f.creates = float64(n) / took.Seconds()
	if f.watch, err = createToWatch(ctx, kube, kube, "ds-same", samples, false); err != nil {
		return f, err
	}
	if other != nil {
		watcher := kubernetes.NewForConfigOrDie(other.config(spaces.Root))
		if f.across, err = createToWatch(ctx, kube, watcher, "ds-across", acrossSamples, true); err != nil {
			return f, err
		}
	}
	return f, nil
}

// createToWatch creates n ConfigMaps one at a time through writer and
// times each until watcher's watch delivers it. With atRandom, each create
// waits a random part of a second first: a create made as soon as the last
// event came would follow a poll of the datastore, and always wait a whole
// poll interval for the next.
func createToWatch(ctx context.Context, writer, watcher kubernetes.Interface, ns string, n int, atRandom bool) ([]time.Duration, error) {
	if _, err := writer.CoreV1().Namespaces().Create(ctx, namespace(ns), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// The watcher's server may learn of the namespace a poll later: watch
	// from now on, whatever it knows.
	var w watch.Interface
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		w, err = watcher.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{}) // lives beyond the poll
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", ns, err)
	}
	defer w.Stop()
	var out []time.Duration
	for i := range n {
		name := fmt.Sprintf("cm-%d", i)
		if atRandom {
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(time.Second)))):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		began := time.Now()
		if _, err := writer.CoreV1().ConfigMaps(ns).Create(ctx, configMap(name), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		timeout := time.After(30 * time.Second)
		for seen := false; !seen; {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return nil, fmt.Errorf("watch ended waiting for %s", name)
				}
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added && cm.Name == name {
					out = append(out, time.Since(began))
					seen = true
				}
			case <-timeout:
				return nil, fmt.Errorf("no watch event for %s within 30s", name)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return out, nil
}

package main

import (
	"context"
	"fmt"
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

// datastoreBench compares SQLite (one server, the default) with PostgreSQL
// (two servers sharing it, started with one --token): write throughput,
// create-to-watch latency, and on PostgreSQL the latency from a create
// through one server to the event on a watch of the other.
func datastoreBench(ctx context.Context, bin string, n int, progress func(string, ...any)) ([]row, error) {
	samples := min(n/4, 200)
	progress("datastores: SQLite, %d creates and %d watch samples", n, samples)
	sqlite, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(sqlite.dataDir)
	defer sqlite.stop()
	lite, err := measureDatastore(ctx, sqlite, nil, n, samples)
	sqlite.stop()
	if err != nil {
		return nil, fmt.Errorf("SQLite: %w", err)
	}

	progress("datastores: PostgreSQL (two servers), %d creates and %d watch samples each way", n, samples)
	pg, err := harness.NewPostgres(ctx)
	if err != nil {
		return nil, err
	}
	defer pg.Stop()
	args := []string{"--datastore-endpoint", pg.DSN, "--token", "bench-cluster"}
	a, err := start(ctx, bin, "", args...)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(a.dataDir)
	defer a.stop()
	b, err := start(ctx, bin, "", args...)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(b.dataDir)
	defer b.stop()
	post, err := measureDatastore(ctx, a, b, n, samples)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL: %w", err)
	}

	ratio := func(x, y float64) string { return fmt.Sprintf("%.2f", x/y) }
	p := func(ds []time.Duration, q int) time.Duration { return percentile(ds, q) }
	note := fmt.Sprintf("%d ConfigMap creates, 32 clients; PostgreSQL 15 on loopback, fsync off", n)
	return []row{
		{"SQLite: creates/s", fmt.Sprintf("%.0f", lite.creates), note},
		{"PostgreSQL: creates/s", fmt.Sprintf("%.0f", post.creates), "PostgreSQL / SQLite: " + ratio(post.creates, lite.creates)},
		{"SQLite: create → watch p50", ms(p(lite.watch, 50)), fmt.Sprintf("%d sequential creates, watch on the same server", len(lite.watch))},
		{"SQLite: create → watch p99", ms(p(lite.watch, 99)), ""},
		{"PostgreSQL: create → watch p50", ms(p(post.watch, 50)), "same server; PostgreSQL / SQLite: " + ratio(float64(p(post.watch, 50)), float64(p(lite.watch, 50)))},
		{"PostgreSQL: create → watch p99", ms(p(post.watch, 99)), ""},
		{"PostgreSQL: across servers p50", ms(p(post.across, 50)), "create through one server, ADDED on a watch of the other: kine polls the database every second"},
		{"PostgreSQL: across servers p99", ms(p(post.across, 99)), "target: about a second"},
	}, nil
}

// measureDatastore measures through server s (and, if other is set, from s
// to a watch on other).
func measureDatastore(ctx context.Context, s, other *server, n, samples int) (datastoreFigures, error) {
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
	if f.watch, err = createToWatch(ctx, kube, kube, "ds-same", samples); err != nil {
		return f, err
	}
	if other != nil {
		watcher := kubernetes.NewForConfigOrDie(other.config(spaces.Root))
		if f.across, err = createToWatch(ctx, kube, watcher, "ds-across", samples); err != nil {
			return f, err
		}
	}
	return f, nil
}

// createToWatch creates n ConfigMaps one at a time through writer and
// times each until watcher's watch delivers it.
func createToWatch(ctx context.Context, writer, watcher kubernetes.Interface, ns string, n int) ([]time.Duration, error) {
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

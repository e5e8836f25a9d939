// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command edge-cluster runs one edgecluster test cluster (real
// kube-apiserver, kube-controller-manager, kube-scheduler and etcd, with kwok
// faking the nodes) until it is interrupted, then stops it cleanly.
//
//	edge-cluster [-name edgecluster] [-nodes 1] [-dir DIR]
//	edge-cluster -build-only
//	edge-cluster -build-kine
//
// With -build-only it only builds the binaries (or finds them in the cache)
// and prints their directory; with -build-kine it does the same for the
// standalone kine that `make bench` runs kube-apiserver on, and prints its
// path. `make edge-cluster` and `make edgecluster-tools` run it, and so does
// hack/bench-deps.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kubestellar/kubestellar/test/edgecluster"
)

func main() {
	var opts edgecluster.Options
	flag.StringVar(&opts.Name, "name", "edgecluster", "name of the cluster and of its kubeconfig context")
	flag.IntVar(&opts.Nodes, "nodes", 1, "number of fake (kwok) nodes")
	flag.StringVar(&opts.Dir, "dir", "", "directory for the cluster's files, kept after it stops (default: a temporary directory, removed)")
	buildOnly := flag.Bool("build-only", false, "only build the binaries, and print their directory")
	buildKine := flag.Bool("build-kine", false, "only build the standalone kine (with cgo, as kubestellar), and print its path")
	buildKonnectivity := flag.Bool("build-konnectivity", false, "only build konnectivity's proxy-server and proxy-agent, and print their paths")
	flag.Parse()

	logger := log.New(os.Stderr, "", log.LstdFlags)
	opts.Logf = logger.Printf

	// The cluster's processes are in process groups of their own, so a
	// Ctrl-C reaches only this process, which stops them in order.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// If our output goes to a pipe whose reader dies with the same Ctrl-C
	// (`make edge-cluster | tee log`), writing must fail rather than kill
	// this process before it has stopped the cluster.
	signal.Ignore(syscall.SIGPIPE)
	if *buildKine {
		kine, err := edgecluster.EnsureKine(ctx, opts.Logf)
		if err != nil {
			logger.Printf("edge-cluster: %v", err)
			os.Exit(1)
		}
		fmt.Println(kine.Path)
		return
	}
	if *buildKonnectivity {
		kn, err := edgecluster.EnsureKonnectivity(ctx, opts.Logf)
		if err != nil {
			logger.Printf("edge-cluster: %v", err)
			os.Exit(1)
		}
		fmt.Println(kn.Server)
		fmt.Println(kn.Agent)
		return
	}
	if err := run(ctx, opts, *buildOnly); err != nil {
		logger.Printf("edge-cluster: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts edgecluster.Options, buildOnly bool) error {
	started := time.Now()
	bins, err := edgecluster.EnsureBinaries(ctx, opts.Logf)
	if err != nil {
		return err
	}
	opts.Logf("binaries in %s (kubernetes %s, etcd %s, kwok %s; %s)", bins.Dir,
		bins.Versions.Kubernetes, bins.Versions.Etcd, bins.Versions.Kwok, time.Since(started).Round(time.Millisecond))
	if buildOnly {
		fmt.Println(bins.Dir)
		return nil
	}
	opts.Binaries = bins
	cluster, err := edgecluster.StartCluster(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("Cluster %q is ready. Its kubeconfig:\n\n    export KUBECONFIG=%s\n\nLogs are in %s. Press Ctrl-C to stop it.\n",
		cluster.Name, cluster.KubeconfigPath, cluster.Dir)
	waitErr := cluster.Wait(ctx)
	if waitErr == nil {
		opts.Logf("stopping cluster %s", cluster.Name)
	}
	stopErr := cluster.Stop()
	if waitErr != nil {
		return waitErr
	}
	return stopErr
}

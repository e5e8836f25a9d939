// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package join is `kubestellar syncer join`.
package join

import (
	"context"
	"os"
	"runtime/debug"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/internal/imagepages"
	"github.com/kubestellar/kubestellar/internal/sdnotify"
	"github.com/kubestellar/kubestellar/syncer"
)

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := syncer.NewOptions()
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Run the syncer: keep an edge cluster in step with its SyncTarget's mailbox at the center",
		Long: `Join an edge cluster to a kubestellar server and keep it in step.

The syncer connects to the server (every connection goes from the edge to the
center), checks the server's CA against the hash in the token, finds the
SyncTarget's mailbox, applies what the mailbox holds into the edge cluster,
and reports status, the state of pods and ReplicaSets, and upsynced objects
back. It runs until stopped. When the center is unreachable the edge keeps
what it runs; the syncer keeps its last desired state in --data-dir.

The command to run is printed by 'kubestellar synctarget create'. The token
is a secret: give it in a file (--token-file) or in $KUBESTELLAR_TOKEN rather
than with --token, which every user of the machine sees in the process list.`,
		Example: `  kubestellar syncer join --server https://center:6443 --token-file /etc/kubestellar/edge1.token \
      --sync-target edge1 --kubeconfig edge1.kubeconfig
  KUBESTELLAR_TOKEN=K10<ca-hash>::<id>.<secret> kubestellar syncer join --server https://center:6443 --sync-target edge1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, os.Getenv, streams) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runE(ctx context.Context, o *syncer.Options, getenv func(string) string, streams iostreams.IOStreams) error {
	from, err := o.LoadToken(getenv)
	if err != nil {
		return err
	}
	if from == "--token" {
		klog.FromContext(ctx).Info("the join token is on the command line, where every user of this machine can read it",
			"instead", "--token-file FILE or $"+syncer.TokenEnv)
	}
	o.Complete()
	if err := o.Validate(); err != nil {
		return err
	}
	// The tunnel library logs every failed attempt through logrus; the
	// syncer reports the tunnel itself, once per change.
	if !klog.V(4).Enabled() {
		logrus.SetLevel(logrus.FatalLevel)
	}
	// Under systemd (Type=notify), say when the syncer keeps the edge and
	// when it stops.
	notifier := sdnotify.Take()
	// The binary's pages that the server's package inits touched, and the
	// syncer's own start-up, are given back: now, and again once the
	// first sync is through, from when they are read from disk as they
	// are used, a page at a time (see internal/imagepages).
	releasePages(ctx, "start", false)
	// The syncer is an agent beside the edge's workloads, idle most of
	// the time: a heap that grows to 1.4 times what is live rather than
	// twice costs little CPU and keeps its resident memory down (make
	// bench's syncer idle RSS row). $GOGC, when set, decides.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(40)
	}
	o.OnReady = func(status string) {
		if err := notifier.Notify(sdnotify.Ready(status)...); err != nil {
			klog.FromContext(ctx).Error(err, "cannot tell systemd the syncer is ready")
		}
		releasePages(ctx, "first sync", true)
	}
	go func() {
		<-ctx.Done()
		_ = notifier.Notify(sdnotify.Stopping()...)
	}()
	return syncer.Run(ctx, o, streams.Out)
}

// releasePages gives back the executable's pages the syncer no longer
// uses (onDemand: see imagepages.Release); a failure costs only memory.
func releasePages(ctx context.Context, when string, onDemand bool) {
	logger := klog.FromContext(ctx)
	r, err := imagepages.Release(onDemand)
	if err != nil {
		logger.Error(err, "cannot release the executable's unused pages", "after", when)
		return
	}
	logger.V(2).Info("released the executable's pages", "after", when, "mappings", r.Mappings, "bytes", r.Bytes)
}

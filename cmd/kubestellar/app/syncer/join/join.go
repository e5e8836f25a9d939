// Package join is `kubestellar syncer join`.
package join

import (
	"context"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
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

The command to run is printed by 'kubestellar synctarget create'.`,
		Example: `  kubestellar syncer join --server https://center:6443 --token K10...::abcdef.0123456789abcdef \
      --sync-target edge1 --kubeconfig edge1.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runE(ctx context.Context, o *syncer.Options, streams iostreams.IOStreams) error {
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
	o.OnReady = func(status string) {
		if err := notifier.Notify(sdnotify.Ready(status)...); err != nil {
			klog.FromContext(ctx).Error(err, "cannot tell systemd the syncer is ready")
		}
	}
	go func() {
		<-ctx.Done()
		_ = notifier.Notify(sdnotify.Stopping()...)
	}()
	return syncer.Run(ctx, o, streams.Out)
}

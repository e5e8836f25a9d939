// Package start is `kubestellar server start`.
package start

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/embedded"
	"github.com/kubestellar/kubestellar/internal/sdnotify"
)

type options struct {
	server *embedded.Options
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{server: embedded.NewOptions()}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the kubestellar server in the foreground",
		Long: `Run the kubestellar server: an API server hosting spaces (logical clusters at
/spaces/NAME), over kine on SQLite in --data-dir unless --datastore-endpoint
names another datastore, with the workload-management controllers in-process.

The admin kubeconfig is written to DATA_DIR/admin.kubeconfig.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd, o, streams) },
	}
	o.server.AddFlags(cmd.Flags())
	return cmd
}

func runE(cmd *cobra.Command, o *options, _ iostreams.IOStreams) error {
	ctx := klog.NewContext(cmd.Context(), klog.Background())
	// Readiness is ours to announce to systemd, not the apiserver's.
	notifier := sdnotify.Take()
	completed, err := o.server.Complete()
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	cfg, err := embedded.NewConfig(ctx, completed)
	if err != nil {
		return err
	}
	srv, err := cfg.New(ctx)
	if err != nil {
		cfg.Close()
		return err
	}
	srv.OnReady(func() {
		if err := notifier.Notify(sdnotify.Ready("serving " + cfg.BaseURL())...); err != nil {
			klog.FromContext(ctx).Error(err, "cannot tell systemd the server is ready")
		}
	})
	go func() {
		<-ctx.Done()
		_ = notifier.Notify(sdnotify.Stopping()...)
	}()
	if err := srv.Run(ctx); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

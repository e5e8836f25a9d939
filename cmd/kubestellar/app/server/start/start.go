// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package start is `kubestellar server start`.
package start

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/internal/imagepages"
	"github.com/kubestellar/kubestellar/internal/sdnotify"
	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/server/storage"
)

type options struct {
	server *server.Options
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{server: server.NewOptions()}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the kubestellar server in the foreground",
		Long: `Run the kubestellar server: an API server hosting spaces (logical clusters at
/spaces/NAME), over kine on SQLite in --data-dir unless --datastore-endpoint
names another datastore, with the workload-management controllers in-process.

The admin kubeconfig is written to DATA_DIR/admin.kubeconfig.

Secrets stay out of the process list when given in the environment, as k3s
takes K3S_TOKEN and K3S_DATASTORE_ENDPOINT: $KUBESTELLAR_TOKEN stands for
--token and $KUBESTELLAR_DATASTORE_ENDPOINT for --datastore-endpoint when
the flag is not given (flags win). The service reads them from its
environment file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd, o, os.Getenv, streams) },
	}
	o.server.AddFlags(cmd.Flags())
	return cmd
}

func runE(cmd *cobra.Command, o *options, getenv func(string) string, _ iostreams.IOStreams) error {
	ctx := klog.NewContext(cmd.Context(), klog.Background())
	// Readiness is ours to announce to systemd, not the apiserver's.
	notifier := sdnotify.Take()
	warnSecretFlags(ctx, o.server)
	o.server.FromEnv(getenv)
	// Asked for, CRDs per space (or not) are what the datastore gets.
	o.server.CRDLayoutFromDatastore = !cmd.Flags().Changed(server.CRDsPerSpaceFlag)
	completed, err := o.server.Complete()
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	cfg, err := server.NewConfig(ctx, completed)
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
		// The binary's pages the start touched are given back, and those
		// the server uses from now on are read a page at a time rather
		// than in the large folios the start's readahead cached (see
		// internal/imagepages): the server maps what it uses.
		logger := klog.FromContext(ctx)
		if r, err := imagepages.Release(true); err != nil {
			logger.Error(err, "cannot release the executable's unused pages")
		} else {
			logger.V(2).Info("released the executable's pages", "mappings", r.Mappings, "bytes", r.Bytes)
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

// warnSecretFlags says which secrets were given as flags, which every user
// of the machine reads in the process list: an installation made before
// `server install` put them in the environment file's variables, say.
func warnSecretFlags(ctx context.Context, o *server.Options) {
	logger := klog.FromContext(ctx)
	if o.Token != "" {
		logger.Info("the cluster token is on the command line, where every user of this machine can read it",
			"instead", "--token-file FILE or $"+server.TokenEnv)
	}
	if o.DatastoreEndpoint != "" && storage.Redact(o.DatastoreEndpoint) != o.DatastoreEndpoint {
		logger.Info("the datastore password is on the command line, where every user of this machine can read it",
			"instead", "$"+server.DatastoreEndpointEnv)
	}
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package uninstall is `kubestellar server uninstall`.
package uninstall

import (
	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/packaging"
)

type options struct {
	root  string
	purge bool
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop and remove the kubestellar.service that 'server install' installed",
		Long: `Stop and disable kubestellar.service (where systemd runs) and remove
` + packaging.UnitDir + `/` + packaging.ServerUnitName + ` and ` + packaging.ServerEnvFile + `
(and ` + packaging.ConfigDir + ` when nothing else is left in it).

The server's data stays unless --purge is given: then the data dir that
` + packaging.ServerEnvFile + ` names (default ` + packaging.DefaultServerDataDir + `) is removed too, with
every certificate, token and object of the server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd, o, streams) },
	}
	cmd.Flags().StringVar(&o.root, "root", "", "remove the files under this directory instead of /, and run no systemctl")
	cmd.Flags().BoolVar(&o.purge, "purge", false, "also remove the server's data dir: all its state")
	return cmd
}

func runE(cmd *cobra.Command, o *options, streams iostreams.IOStreams) error {
	return packaging.UninstallServer(cmd.Context(), packaging.NewHost(o.root, streams.Out, streams.ErrOut), o.purge)
}

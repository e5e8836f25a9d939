// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package uninstall is `kubestellar syncer uninstall`.
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
		Use:   "uninstall SYNC-TARGET",
		Short: "Stop and remove the syncer service of a SyncTarget that 'syncer install' installed",
		Long: `Stop and disable kubestellar-syncer@SYNC-TARGET.service (where systemd runs)
and remove ` + packaging.ConfigDir + `/syncer-SYNC-TARGET.env, and the template unit
` + packaging.UnitDir + `/` + packaging.SyncerTemplateName + ` once no other syncer uses it.

The syncer's saved state stays unless --purge is given: then its data dir
(default ` + packaging.SyncerDataDirParent + `/SYNC-TARGET) is removed too. The edge
cluster's objects are left as they are.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runE(cmd, o, args[0], streams) },
	}
	cmd.Flags().StringVar(&o.root, "root", "", "remove the files under this directory instead of /, and run no systemctl")
	cmd.Flags().BoolVar(&o.purge, "purge", false, "also remove the syncer's data dir (its saved state)")
	return cmd
}

func runE(cmd *cobra.Command, o *options, syncTarget string, streams iostreams.IOStreams) error {
	return packaging.UninstallSyncer(cmd.Context(), packaging.NewHost(o.root, streams.Out, streams.ErrOut), syncTarget, o.purge)
}

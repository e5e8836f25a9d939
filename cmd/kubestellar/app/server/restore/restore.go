// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package restore is `kubestellar server restore`.
package restore

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/server"
)

type options struct {
	dataDir string
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Make a data directory from a backup, for a server to start on",
		Long: `Make DIR a data directory from a backup 'kubestellar server backup' wrote
(FILE "-": standard input), then start the server on it with
'kubestellar server start --data-dir DIR'. It is the same server: its CA,
tokens, spaces and objects are those of the backup.

It never overwrites: DIR must hold no database (a new or empty directory).
To restore a server in place, stop it, move its data directory away, and
restore into the old path.`,
		Example: `  sudo systemctl stop kubestellar
  sudo mv /var/lib/kubestellar /var/lib/kubestellar.broken
  sudo kubestellar server restore /srv/backups/kubestellar-2026-12-01.tar.gz --data-dir /var/lib/kubestellar
  sudo systemctl start kubestellar`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runE(o, args[0], streams) },
	}
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "The data directory to make (required; it must hold no database).")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

func runE(o *options, file string, streams iostreams.IOStreams) error {
	var r io.Reader = streams.In
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("FILE: %w", err)
		}
		defer f.Close()
		r = f
	}
	sum, err := server.Restore(r, o.dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(streams.ErrOut, "restored %s into %s: the datastore (%d bytes) and %d other files; start the server with: kubestellar server start --data-dir %s\n",
		file, o.dataDir, sum.DatabaseBytes, sum.Files-1, o.dataDir)
	return nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package backup is `kubestellar server backup`.
package backup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/server"
)

type options struct {
	dataDir string
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{dataDir: server.DefaultDataDir()}
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Back up the server's data directory, while it runs or not",
		Long: `Write a backup of the server's data directory to FILE ("-": standard output):
a consistent snapshot of its SQLite datastore, taken while the server runs
(it need not stop), and the server's identity (CA, serving certificate,
admin token and kubeconfig), so that a server restored from it is the same
server to its syncers and users. Run it as the user the server runs as.

Restore with 'kubestellar server restore FILE --data-dir DIR'.

A server on --datastore-endpoint keeps its data in that datastore: back
it up with the database's own tools (pg_dump, mysqldump, etcdctl snapshot
save), and its data directory's pki/ and admin.token with it.`,
		Example: `  sudo kubestellar server backup /srv/backups/kubestellar-$(date +%F).tar.gz
  kubestellar server backup - --data-dir ~/.kubestellar | ssh backup-host 'cat > ks.tar.gz'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runE(cmd, o, args[0], streams) },
	}
	cmd.Flags().StringVar(&o.dataDir, "data-dir", o.dataDir, "The server's data directory.")
	return cmd
}

func runE(cmd *cobra.Command, o *options, file string, streams iostreams.IOStreams) (err error) {
	var w io.Writer = streams.Out
	if file != "-" {
		// Written beside its final name and renamed, so that a failed
		// backup never leaves a file that looks whole.
		// err, not a new one: the deferred functions below read the
		// error runE returns.
		var f *os.File
		f, err = os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
		if err != nil {
			return fmt.Errorf("FILE: %w", err)
		}
		defer func() {
			if err != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		w = f
		defer func() {
			if err == nil {
				err = errors.Join(f.Sync(), f.Close(), os.Rename(f.Name(), file))
			}
		}()
	}
	sum, err := server.Backup(cmd.Context(), o.dataDir, w)
	if err != nil {
		return err
	}
	where := file
	if file == "-" {
		where = "standard output"
	}
	fmt.Fprintf(streams.ErrOut, "backed up %s to %s: the datastore (%d bytes) and %d other files\n", o.dataDir, where, sum.DatabaseBytes, sum.Files-1)
	return nil
}

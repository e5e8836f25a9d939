// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package install is `kubestellar syncer install`.
package install

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/packaging"
	"github.com/kubestellar/kubestellar/syncer"
)

type options struct {
	// joinFlags are the flags of `syncer join`, passed on to the service.
	joinFlags *pflag.FlagSet
	root      string
	noStart   bool
	// getenv and homeDir find the edge cluster's kubeconfig when
	// --kubeconfig is not given.
	getenv  func(string) string
	homeDir func() (string, error)
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{joinFlags: pflag.NewFlagSet("syncer join", pflag.ContinueOnError), getenv: os.Getenv, homeDir: os.UserHomeDir}
	syncer.NewOptions().AddFlags(o.joinFlags)
	o.joinFlags.Lookup("data-dir").Usage = "directory for the syncer's saved state (default " + packaging.SyncerDataDirParent + "/SYNC-TARGET)"
	cmd := &cobra.Command{
		Use:   "install --server URL --token-file FILE --sync-target NAME [--kubeconfig FILE] [--root DIR] [--no-start] [syncer join flags]",
		Short: "Install the syncer of one SyncTarget as a systemd service (kubestellar-syncer@NAME) and start it",
		Long: `Install the syncer as a systemd service, one instance per SyncTarget.

Writes the template unit ` + packaging.UnitDir + `/` + packaging.SyncerTemplateName + `
(Type=notify) running this binary, and ` + packaging.ConfigDir + `/syncer-NAME.env
(mode 0600) with the flags of ` + "`syncer join`" + `, checked now so that a mistake
fails here. The join token (--token, or $` + syncer.TokenEnv + ` when no flag gives
it) goes to that file as ` + syncer.TokenEnv + `, which the syncer reads from its
environment: never on its command line, where every user of the machine
could read it. A --token-file is recorded as such, and read at each start.
Relative paths are made absolute. Without
--kubeconfig, the edge cluster's kubeconfig is $KUBECONFIG or ~/.kube/config
as found now, for the service has neither.

Where systemd runs, it then runs 'systemctl daemon-reload' and
'systemctl enable --no-block --now kubestellar-syncer@NAME.service' (the
syncer is ready only once it reaches the center); elsewhere it prints those
commands. Installing again with other flags restarts the service.`,
		Example: `  sudo kubestellar syncer install --server https://center:6443 --token-file edge1.token \
      --sync-target edge1 --kubeconfig /etc/rancher/k3s/k3s.yaml`,
		Args:                  cobra.NoArgs,
		DisableFlagsInUseLine: true,
		RunE:                  func(cmd *cobra.Command, _ []string) error { return runE(cmd, o, streams) },
	}
	cmd.Flags().AddFlagSet(o.joinFlags)
	cmd.Flags().StringVar(&o.root, "root", "", "write the files under this directory instead of /, and run no systemctl")
	cmd.Flags().BoolVar(&o.noStart, "no-start", false, "do not enable or start the service")
	return cmd
}

func runE(cmd *cobra.Command, o *options, streams iostreams.IOStreams) error {
	binary, err := packaging.Executable()
	if err != nil {
		return err
	}
	args := packaging.ChangedFlags(o.joinFlags)
	// Check the flags before looking for a kubeconfig to add to them.
	if _, _, err := packaging.SyncerArgs(args, o.getenv); err != nil {
		return err
	}
	if !o.joinFlags.Changed("kubeconfig") {
		kubeconfig, from, err := o.defaultKubeconfig()
		if err != nil {
			return err
		}
		if kubeconfig == "" {
			fmt.Fprintln(streams.Out, "no --kubeconfig, $KUBECONFIG or ~/.kube/config: the syncer will use the in-cluster config")
		} else {
			fmt.Fprintf(streams.Out, "using the edge cluster's kubeconfig %s (from %s)\n", kubeconfig, from)
			args = append(args, "--kubeconfig="+kubeconfig)
		}
	}
	return packaging.InstallSyncer(cmd.Context(), packaging.NewHost(o.root, streams.Out, streams.ErrOut), packaging.SyncerInstall{
		Binary:  binary,
		Args:    args,
		Getenv:  o.getenv,
		NoStart: o.noStart,
	})
}

// defaultKubeconfig is the kubeconfig `syncer join` would load here without
// --kubeconfig: the one file $KUBECONFIG names, else ~/.kube/config if it
// exists, else none (in-cluster). The service must be told, for it runs
// without this environment.
func (o *options) defaultKubeconfig() (path, from string, err error) {
	if env := o.getenv("KUBECONFIG"); env != "" {
		var files []string
		for _, f := range filepath.SplitList(env) {
			if f != "" {
				files = append(files, f)
			}
		}
		if len(files) > 1 {
			return "", "", fmt.Errorf("$KUBECONFIG names %d files (%s): pass --kubeconfig with the edge cluster's", len(files), strings.Join(files, ", "))
		}
		if len(files) == 1 {
			abs, err := filepath.Abs(files[0])
			return abs, "$KUBECONFIG", err
		}
	}
	home, err := o.homeDir()
	if err != nil {
		return "", "", nil
	}
	p := filepath.Join(home, ".kube", "config")
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return "", "", nil
	} else if err != nil {
		return "", "", err
	}
	return p, "~/.kube/config", nil
}

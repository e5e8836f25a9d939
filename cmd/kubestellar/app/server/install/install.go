// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package install is `kubestellar server install`.
package install

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/packaging"
	"github.com/kubestellar/kubestellar/server"
)

type options struct {
	// serverFlags are the flags of `server start`, passed on to the service.
	serverFlags *pflag.FlagSet
	root        string
	noStart     bool
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	start := server.NewOptions()
	// The service runs as root, whoever installs it.
	start.DataDir = packaging.DefaultServerDataDir
	o := &options{serverFlags: pflag.NewFlagSet("server start", pflag.ContinueOnError)}
	start.AddFlags(o.serverFlags)
	cmd := &cobra.Command{
		Use:   "install [--root DIR] [--no-start] [server start flags]",
		Short: "Install the server as a systemd service (kubestellar.service) and start it",
		Long: `Install the kubestellar server as a systemd service, as k3s installs itself.

Writes ` + packaging.UnitDir + `/` + packaging.ServerUnitName + ` (Type=notify: the
service is active once the server is ready) running this binary, and
` + packaging.ServerEnvFile + ` (mode 0600) holding the flags of ` + "`server start`" + `,
checked now so that a typo fails here. The secrets go to that file as the
variables the server reads from its environment, never to its command line,
where every user of the machine could read them: --datastore-endpoint as
` + server.DatastoreEndpointEnv + `, --token as ` + server.TokenEnv + ` (either also taken
from this command's environment when the flag is not given); a --token-file
is recorded as such. Where systemd runs, it then runs
'systemctl daemon-reload' and 'systemctl enable --now ` + packaging.ServerUnitName + `',
waiting until the server is ready; elsewhere it prints those commands.
Installing again with other flags rewrites the files and restarts the service.`,
		Example: `  sudo kubestellar server install --tls-san center.example.com
  sudo kubestellar server install --port 7443 --data-dir /srv/kubestellar --no-start
  sudo --preserve-env=KUBESTELLAR_DATASTORE_ENDPOINT kubestellar server install --token-file /etc/kubestellar/token
  kubestellar server install --root ./staging      # write the files under ./staging only`,
		Args:                  cobra.NoArgs,
		DisableFlagsInUseLine: true,
		RunE:                  func(cmd *cobra.Command, _ []string) error { return runE(cmd, o, streams) },
	}
	cmd.Flags().AddFlagSet(o.serverFlags)
	cmd.Flags().StringVar(&o.root, "root", "", "write the files under this directory instead of /, and run no systemctl")
	cmd.Flags().BoolVar(&o.noStart, "no-start", false, "do not enable or start the service")
	return cmd
}

func runE(cmd *cobra.Command, o *options, streams iostreams.IOStreams) error {
	binary, err := packaging.Executable()
	if err != nil {
		return err
	}
	return packaging.InstallServer(cmd.Context(), packaging.NewHost(o.root, streams.Out, streams.ErrOut), packaging.ServerInstall{
		Binary:  binary,
		Args:    packaging.ChangedFlags(o.serverFlags),
		Getenv:  os.Getenv,
		NoStart: o.noStart,
	})
}

// Package version is `kubestellar version`, and holds the build's version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/embedded"
)

// Version is stamped at build time with -ldflags -X; unstamped builds
// report the VCS revision Go recorded, if any.
var Version = "v0.0.0-dev"

// String describes this build.
func String() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 && v == "v0.0.0-dev" {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubestellar",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(streams.Out, "kubestellar %s (Kubernetes API %s, %s, %s/%s)\n",
				String(), embedded.KubernetesVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

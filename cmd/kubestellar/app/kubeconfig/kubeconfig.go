// Package kubeconfig is `kubestellar kubeconfig`: it prints a kubeconfig
// for one space.
package kubeconfig

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	kskubeconfig "github.com/kubestellar/kubestellar/embedded/kubeconfig"
	"github.com/kubestellar/kubestellar/spaces"
)

type options struct {
	client clientconfig.Options
	space  string
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:     "kubeconfig --space NAME",
		Short:   "Print a kubeconfig for one space",
		Example: "  kubestellar kubeconfig --space wds1 > wds1.kubeconfig\n  kubectl --kubeconfig wds1.kubeconfig get ns",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if o.space == "" {
				return errors.New("--space is required")
			}
			if err := spaces.ValidateName(o.space); err != nil && o.space != spaces.Root {
				return fmt.Errorf("--space: %w", err)
			}
			loaded, err := o.client.Load()
			if err != nil {
				return err
			}
			if loaded.Token == "" {
				return fmt.Errorf("the kubeconfig %s carries no bearer token to hand out", loaded.Path)
			}
			data, err := clientcmd.Write(*kskubeconfig.ForSpace(loaded.BaseURL, o.space, loaded.CAData, loaded.Token))
			if err != nil {
				return err
			}
			_, err = streams.Out.Write(data)
			return err
		},
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.space, "space", "", "The space the kubeconfig addresses.")
	return cmd
}

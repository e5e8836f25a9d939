// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package delete is `kubestellar space delete`.
package delete

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/server/kubeconfig"
	"github.com/kubestellar/kubestellar/spaces"
)

type options struct {
	client  clientconfig.Options
	timeout time.Duration
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a space and everything in it",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return runE(cmd.Context(), o, args[0], streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "How long to wait until the space and its contents are gone.")
	return cmd
}

func runE(ctx context.Context, o *options, name string, streams iostreams.IOStreams) error {
	if name == spaces.Root {
		return fmt.Errorf("the root space cannot be deleted")
	}
	if err := spaces.ValidateName(name); err != nil {
		return err
	}
	loaded, err := o.client.Load()
	if err != nil {
		return err
	}
	client, err := loaded.Dynamic(spaces.Root)
	if err != nil {
		return err
	}
	spacesClient := client.Resource(tenancyv1alpha1.SpacesGVR)
	if err := spacesClient.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("space %q not found", name)
		}
		return fmt.Errorf("deleting space %q: %w", name, err)
	}
	fmt.Fprintf(streams.ErrOut, "waiting for space %q and its contents to be removed...\n", name)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, o.timeout, true, func(ctx context.Context) (bool, error) {
		_, err := spacesClient.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("space %q is still being deleted after %s (see the server log)", name, o.timeout)
	}
	if _, ok := loaded.Config.Contexts[name]; ok {
		kubeconfig.RemoveSpaceContext(loaded.Config, name)
		if err := kubeconfig.Write(loaded.Path, loaded.Config); err != nil {
			return fmt.Errorf("space %q deleted, but updating kubeconfig %s failed: %w", name, loaded.Path, err)
		}
	}
	fmt.Fprintf(streams.Out, "space %q deleted\n", name)
	return nil
}

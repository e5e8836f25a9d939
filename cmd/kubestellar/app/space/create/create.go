// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package create is `kubestellar space create`.
package create

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/server/kubeconfig"
	"github.com/kubestellar/kubestellar/spaces"
)

type options struct {
	client    clientconfig.Options
	spaceType string
	// inventorySpaces, for a wds: the inventory spaces its placements may select.
	inventorySpaces []string
	timeout         time.Duration
	noContext       bool
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a space and add a context for it to the kubeconfig",
		Long: `Create a space (a logical cluster served at /spaces/NAME), wait until it is
ready, and add a context named NAME for it to the kubeconfig in use.`,
		Example: `  kubestellar space create demo
  kubectl --context demo create namespace demo
  kubestellar space create inv1 --type inventory
  kubestellar space create wds1 --type wds --inventory-space inv1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runE(cmd.Context(), o, args[0], streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.spaceType, "type", "", `Type of the space: "" (a plain logical cluster), wds (workloads and EdgePlacements) or inventory (SyncTargets and Locations); it cannot change later.`)
	cmd.Flags().StringSliceVar(&o.inventorySpaces, "inventory-space", nil, "For --type wds: an inventory space whose Locations the space's EdgePlacements may select (repeatable, or comma-separated).")
	cmd.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "How long to wait for the space to be ready.")
	cmd.Flags().BoolVar(&o.noContext, "no-context", false, "Do not add a context for the space to the kubeconfig.")
	return cmd
}

func runE(ctx context.Context, o *options, name string, streams iostreams.IOStreams) error {
	if err := spaces.ValidateName(name); err != nil {
		return err
	}
	if name == spaces.Root {
		return fmt.Errorf("the root space always exists")
	}
	switch o.spaceType {
	case tenancyv1alpha1.SpaceTypeGeneric, tenancyv1alpha1.SpaceTypeWDS, tenancyv1alpha1.SpaceTypeInventory:
	case tenancyv1alpha1.SpaceTypeMailbox:
		return fmt.Errorf("--type mailbox: the server makes mailbox spaces, one for each SyncTarget (kubestellar synctarget create)")
	default:
		return fmt.Errorf("--type %q: a space is of type wds, inventory, or none (a plain logical cluster)", o.spaceType)
	}
	if len(o.inventorySpaces) > 0 && o.spaceType != tenancyv1alpha1.SpaceTypeWDS {
		return fmt.Errorf("--inventory-space is for spaces of --type wds")
	}
	for _, inv := range o.inventorySpaces {
		if err := spaces.ValidateName(inv); err != nil {
			return fmt.Errorf("--inventory-space: %w", err)
		}
	}
	loaded, err := o.client.Load()
	if err != nil {
		return err
	}
	client, err := loaded.Dynamic(spaces.Root)
	if err != nil {
		return err
	}
	space := &unstructured.Unstructured{}
	space.SetAPIVersion(tenancyv1alpha1.SchemeGroupVersion.String())
	space.SetKind("Space")
	space.SetName(name)
	if o.spaceType != "" {
		_ = unstructured.SetNestedField(space.Object, o.spaceType, "spec", "type")
	}
	if len(o.inventorySpaces) > 0 {
		_ = unstructured.SetNestedStringSlice(space.Object, o.inventorySpaces, "spec", "inventorySpaces")
	}
	spacesClient := client.Resource(tenancyv1alpha1.SpacesGVR)
	if _, err := spacesClient.Create(ctx, space, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("space %q already exists", name)
		}
		return fmt.Errorf("creating space %q: %w", name, err)
	}
	fmt.Fprintf(streams.ErrOut, "waiting for space %q to be ready...\n", name)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, o.timeout, true, func(ctx context.Context) (bool, error) {
		got, err := spacesClient.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		return phase == string(tenancyv1alpha1.SpacePhaseReady), nil
	})
	if err != nil {
		return fmt.Errorf("space %q was created but is not ready after %s (see the server log)", name, o.timeout)
	}
	if o.noContext {
		fmt.Fprintf(streams.Out, "space %q created\n", name)
		return nil
	}
	authInfo := loaded.Config.Contexts[loaded.Config.CurrentContext].AuthInfo
	if o.client.Context != "" {
		authInfo = loaded.Config.Contexts[o.client.Context].AuthInfo
	}
	kubeconfig.AddSpaceContext(loaded.Config, loaded.BaseURL, name, loaded.CAData, authInfo)
	if err := kubeconfig.Write(loaded.Path, loaded.Config); err != nil {
		return fmt.Errorf("space %q created, but writing kubeconfig %s failed: %w", name, loaded.Path, err)
	}
	fmt.Fprintf(streams.Out, "space %q created; context %q added to %s\n", name, name, loaded.Path)
	return nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package delete is `kubestellar synctarget delete`: it undoes
// `synctarget create`, revoking the SyncTarget's syncer tokens first.
package delete

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
)

var (
	syncTargetsGVR = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")
	locationsGVR   = edgev2alpha1.SchemeGroupVersion.WithResource("locations")
)

type options struct {
	client         clientconfig.Options
	inventorySpace string
	timeout        time.Duration
	// connect is center.Connect, or a fake in tests.
	connect func(*clientconfig.Options) (*center.Center, error)
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{connect: center.Connect}
	cmd := &cobra.Command{
		Use:   "delete NAME --inventory-space SPACE",
		Short: "Remove an edge cluster: its syncer tokens, its Location and its SyncTarget",
		Long: `Revoke every syncer token of the SyncTarget NAME, delete the Location that
'kubestellar synctarget create' made for it (a Location made otherwise is
left alone), delete the SyncTarget and wait until it and its mailbox are gone.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runE(cmd.Context(), o, args[0], streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.inventorySpace, "inventory-space", "", "Space holding the SyncTarget (required).")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "How long to wait until the SyncTarget and its mailbox are gone.")
	return cmd
}

func runE(ctx context.Context, o *options, name string, streams iostreams.IOStreams) error {
	if err := auth.ValidateSyncTargetName(name); err != nil {
		return err
	}
	if o.inventorySpace == "" {
		return fmt.Errorf("--inventory-space is required: the space holding the SyncTarget")
	}
	c, err := o.connect(&o.client)
	if err != nil {
		return err
	}
	if err := c.RequireSpace(ctx, "--inventory-space", o.inventorySpace); err != nil {
		return err
	}
	inv := spaces.WithSpace(ctx, o.inventorySpace)
	found := false

	// Tokens first: the syncer loses its access before anything else goes.
	revoked, err := auth.RevokeSyncTargetTokens(ctx, c.Root, o.inventorySpace, name)
	if err != nil {
		return err
	}
	if len(revoked) > 0 {
		found = true
		fmt.Fprintf(streams.ErrOut, "revoked token(s) %s\n", strings.Join(revoked, ", "))
	}

	locations := c.Dynamic.Resource(locationsGVR)
	made, err := locations.List(inv, metav1.ListOptions{
		LabelSelector: labels.Set{center.MadeByLabel: center.MadeBySyncTargetCreate}.String()})
	if err != nil {
		return fmt.Errorf("listing Locations: %w", err)
	}
	for _, loc := range made.Items {
		if loc.GetAnnotations()[center.SyncTargetAnnotation] != name {
			continue
		}
		if err := locations.Delete(inv, loc.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Location %q: %w", loc.GetName(), err)
		}
		found = true
		fmt.Fprintf(streams.ErrOut, "deleted Location %q\n", loc.GetName())
	}

	syncTargets := c.Dynamic.Resource(syncTargetsGVR)
	err = syncTargets.Delete(inv, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		if !found {
			return fmt.Errorf("there is no SyncTarget %q in space %q", name, o.inventorySpace)
		}
		fmt.Fprintf(streams.Out, "SyncTarget %q was already gone from space %q\n", name, o.inventorySpace)
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting SyncTarget %q: %w", name, err)
	}
	fmt.Fprintf(streams.ErrOut, "waiting for SyncTarget %q and its mailbox to be removed...\n", name)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, o.timeout, true, func(ctx context.Context) (bool, error) {
		_, err := syncTargets.Get(spaces.WithSpace(ctx, o.inventorySpace), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("SyncTarget %q is still being deleted after %s (see the server log)", name, o.timeout)
	}
	fmt.Fprintf(streams.Out, "SyncTarget %q deleted from space %q\n", name, o.inventorySpace)
	return nil
}

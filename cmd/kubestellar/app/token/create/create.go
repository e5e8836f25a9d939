// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package create is `kubestellar token create`: a new syncer token for an
// existing SyncTarget, or a new user token.
package create

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/server/auth"
)

type options struct {
	client      clientconfig.Options
	syncTarget  string
	user        string
	groups      []string
	ttl         time.Duration
	description string
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "create (--sync-target INVENTORY-SPACE/NAME | --user NAME [--group GROUP]...)",
		Short: "Create a syncer token for a SyncTarget, or a user token, and print it",
		Long: `Create a token that a syncer uses to serve one SyncTarget: it reaches that
SyncTarget (and its status) and its mailbox space, nothing else.

Or, with --user, a bearer token for a person or a program: it authenticates
as that user name and groups (and system:authenticated), and may do in each
space what that space's RBAC grants them (kubectl create rolebinding ...).

Only the token goes to stdout; the server keeps only a hash of its secret, so
it cannot be shown again. 'kubestellar token list' and 'revoke' handle both
kinds.`,
		Example: `  kubestellar token create --sync-target inv1/edge1 --ttl 24h --description 'edge1 rebuild'
  kubestellar token create --user alice --group team-a --ttl 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.syncTarget, "sync-target", "", "The SyncTarget of a syncer token, as INVENTORY-SPACE/NAME.")
	cmd.Flags().StringVar(&o.user, "user", "", "The user name of a user token.")
	cmd.Flags().StringArrayVar(&o.groups, "group", nil, "A group of the user token's user (repeat for several).")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "How long the token works, e.g. 24h (default: 0, for ever).")
	cmd.Flags().StringVar(&o.description, "description", "", "Free-form note shown by 'kubestellar token list'.")
	return cmd
}

func runE(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	switch {
	case o.syncTarget != "" && o.user != "":
		return fmt.Errorf("--sync-target and --user exclude each other: a token is a syncer's or a user's")
	case o.user != "":
		return createUserToken(ctx, o, streams)
	case len(o.groups) > 0:
		return fmt.Errorf("--group needs --user: groups belong to a user token")
	case o.syncTarget == "":
		return fmt.Errorf("--sync-target INVENTORY-SPACE/NAME (a syncer token) or --user NAME (a user token) is required")
	}
	inv, name, err := auth.ParseSyncTargetRef(o.syncTarget)
	if err != nil {
		return fmt.Errorf("--sync-target: %w", err)
	}
	if err := center.ValidateTTL(o.ttl); err != nil {
		return err
	}
	c, err := center.Connect(&o.client)
	if err != nil {
		return err
	}
	st, err := c.SyncTarget(ctx, "--sync-target", inv, name)
	if err != nil {
		return err
	}
	tok, note, err := c.SyncerToken(ctx, inv, st, o.ttl, o.description)
	if err != nil {
		return err
	}
	fmt.Fprintln(streams.ErrOut, note)
	fmt.Fprintln(streams.Out, tok)
	return nil
}

func createUserToken(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	if err := auth.ValidateUserIdentity(o.user, o.groups); err != nil {
		return fmt.Errorf("--user/--group: %w", err)
	}
	if err := center.ValidateTTL(o.ttl); err != nil {
		return err
	}
	c, err := center.Connect(&o.client)
	if err != nil {
		return err
	}
	caPEM, err := c.CACerts(ctx)
	if err != nil {
		return err
	}
	tok, info, err := auth.CreateUserToken(ctx, c.Root, auth.NewUserTokenOptions{User: o.user, Groups: o.groups,
		TTL: o.ttl, Description: o.description, CAPEM: caPEM})
	if err != nil {
		return err
	}
	fmt.Fprintf(streams.ErrOut, "token %s created for %s (expires: %s); it may do what RBAC grants it in each space\n",
		info.ID, info.Holder(), center.DescribeExpiration(info, time.Now()))
	fmt.Fprintln(streams.Out, tok.Bearer())
	return nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package revoke is `kubestellar token revoke`.
package revoke

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/server/auth"
)

type options struct {
	client clientconfig.Options
	// connect is center.Connect, or a fake in tests.
	connect func(*clientconfig.Options) (*center.Center, error)
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{connect: center.Connect}
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a syncer token; it stops working at once",
		Long:  "Revoke a syncer token, named by its id (see 'kubestellar token list') or given whole.",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return runE(cmd.Context(), o, args[0], streams) },
	}
	o.client.AddFlags(cmd.Flags())
	return cmd
}

func runE(ctx context.Context, o *options, arg string, streams iostreams.IOStreams) error {
	id := arg
	if !jointoken.ValidID(id) {
		tok, err := jointoken.Parse(arg)
		if err != nil {
			return fmt.Errorf("ID: neither a token id (%d characters of [a-z0-9]) nor a token: %w", jointoken.IDLength, err)
		}
		id = tok.ID
	}
	c, err := o.connect(&o.client)
	if err != nil {
		return err
	}
	if err := auth.RevokeToken(ctx, c.Root, id); err != nil {
		return err
	}
	fmt.Fprintf(streams.Out, "token %s revoked\n", id)
	return nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package list is `kubestellar token list`.
package list

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/server/auth"
)

type options struct {
	client clientconfig.Options
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the syncer tokens (never their secrets)",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.client.AddFlags(cmd.Flags())
	return cmd
}

func runE(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	c, err := center.Connect(&o.client)
	if err != nil {
		return err
	}
	tokens, err := auth.ListTokens(ctx, c.Root)
	if err != nil {
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(streams.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "ID\tSYNC-TARGET\tUSER\tGROUPS\tEXPIRES\tDESCRIPTION")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, t := range tokens {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, dash(t.SyncTargetRef()), dash(t.User), dash(strings.Join(t.Groups, ",")),
			center.DescribeExpiration(t, now), t.Description)
	}
	return w.Flush()
}

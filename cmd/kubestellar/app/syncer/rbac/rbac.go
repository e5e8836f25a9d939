// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rbac is `kubestellar syncer rbac`: the ClusterRole an in-cluster
// syncer needs at its edge for what is placed on its SyncTarget now.
package rbac

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/packaging"
	"github.com/kubestellar/kubestellar/packaging/chart"
	"github.com/kubestellar/kubestellar/server/auth"
)

type options struct {
	client     clientconfig.Options
	syncTarget string
	namespace  string
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "rbac --sync-target INVENTORY-SPACE/NAME",
		Short: "Print the ClusterRole a syncer in its edge cluster needs for what is placed on it now",
		Long: `Print the ClusterRole kubestellar-syncer:NAMESPACE:placed, which grants an
in-cluster syncer (one run by 'kubestellar syncer manifest' or the chart,
with --rbac-mode least-privilege) what the placements on its SyncTarget name
now: write access to every kind it places, and read access to what it
upsyncs. Apply it at the edge when the SyncTarget or a placement shows a
MissingPermission problem; the syncer retries on its own.

Read what it grants before applying it: a tenant whose workload is placed
on the SyncTarget decides which kinds those are.`,
		Example: `  kubestellar syncer rbac --sync-target inv1/edge1 | kubectl --kubeconfig edge1.kubeconfig apply -f -`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.syncTarget, "sync-target", "", "The SyncTarget whose syncer it is, as INVENTORY-SPACE/NAME (required).")
	cmd.Flags().StringVar(&o.namespace, "namespace", chart.DefaultNamespace, "Namespace the syncer runs in at the edge (the ClusterRole's name has it).")
	return cmd
}

func runE(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	if o.syncTarget == "" {
		return fmt.Errorf("--sync-target INVENTORY-SPACE/NAME is required: the SyncTarget whose syncer it is")
	}
	inv, name, err := auth.ParseSyncTargetRef(o.syncTarget)
	if err != nil {
		return fmt.Errorf("--sync-target: %w", err)
	}
	s := packaging.InClusterSyncer{Namespace: o.namespace, SyncTarget: name}
	if err := s.Validate(); err != nil {
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
	if s.Rules, _, err = c.PlacedRules(ctx, inv, st); err != nil {
		return err
	}
	data, err := s.PlacedRole()
	if err != nil {
		return err
	}
	if len(s.Rules) == 0 {
		fmt.Fprintf(streams.ErrOut, "nothing is placed on %s/%s now: the ClusterRole grants nothing\n", inv, name)
	} else {
		fmt.Fprintf(streams.ErrOut, "what is placed on %s/%s now: %s\n", inv, name, packaging.DescribeRules(s.Rules))
	}
	_, err = streams.Out.Write(data)
	return err
}

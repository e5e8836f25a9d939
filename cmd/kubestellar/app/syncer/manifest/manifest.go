// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package manifest is `kubestellar syncer manifest`: the objects that run
// a SyncTarget's syncer inside its edge cluster, for kubectl apply.
package manifest

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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
	server     string
	ttl        time.Duration
	uninstall  bool
	syncer     packaging.InClusterSyncer
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "manifest --sync-target INVENTORY-SPACE/NAME",
		Short: "Print the manifest that runs a SyncTarget's syncer inside its edge cluster",
		Long: `Print the objects that run the syncer of an existing SyncTarget inside its
edge cluster, for 'kubectl apply -f -' there: a namespace (Pod Security
"restricted"), a ServiceAccount, a Secret holding a new join token (mounted as
a file), the edge RBAC, and a Deployment of one replica of the kubestellar
image. The Helm chart in packaging/chart renders the same template.

The edge RBAC (--rbac-mode least-privilege, the default) is a ClusterRole
aggregated from those labelled edge.kubestellar.io/aggregate-to-syncer=true:
what the syncer itself needs, and what is placed on the SyncTarget now. When
a placement later needs more, the SyncTarget and the placement show a
MissingPermission problem, and 'kubestellar syncer rbac' prints the
ClusterRole to apply.

The manifest holds the token: keep it as you keep the token. With
--uninstall, it prints the same objects by name only, for 'kubectl delete
-f -', which stops the syncer and leaves what it placed running.`,
		Example: `  kubestellar syncer manifest --sync-target inv1/edge1 | kubectl --kubeconfig edge1.kubeconfig apply -f -
  kubestellar syncer manifest --sync-target inv1/edge1 --image registry.example/kubestellar:v0.30.0 --namespace edge-agent > edge1-syncer.yaml
  kubestellar syncer manifest --uninstall | kubectl --kubeconfig edge1.kubeconfig delete -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.syncTarget, "sync-target", "", "The SyncTarget whose syncer it is, as INVENTORY-SPACE/NAME (required, but for --uninstall).")
	cmd.Flags().StringVar(&o.server, "server", "", "URL the edge reaches the server at (default: the kubeconfig's server).")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "How long the token in the manifest works, e.g. 720h (default: 0, for ever).")
	cmd.Flags().BoolVar(&o.uninstall, "uninstall", false, "Print the syncer's objects by name, for kubectl delete -f -, instead (needs no server).")
	AddSyncerFlags(cmd.Flags(), &o.syncer)
	return cmd
}

// AddSyncerFlags binds the flags that shape the in-cluster syncer, which
// `synctarget create --output manifest` shares.
func AddSyncerFlags(fs *pflag.FlagSet, s *packaging.InClusterSyncer) {
	fs.StringVar(&s.Image, "image", "", "The kubestellar image the syncer runs (default: the chart's, ghcr.io/kubestellar/kubestellar:latest).")
	fs.StringVar(&s.Namespace, "namespace", chart.DefaultNamespace, "Namespace of the edge cluster the syncer runs in (made by the manifest).")
	fs.StringVar(&s.RBACMode, "rbac-mode", packaging.RBACLeastPrivilege, "What the syncer may do at the edge: least-privilege (what is placed on it) or cluster-admin.")
	fs.StringVar(&s.PriorityClassName, "priority-class", "", "PriorityClass of the syncer's pod (default: none).")
	fs.StringVar(&s.ClaimName, "persistent-volume-claim", "", "PersistentVolumeClaim to keep the syncer's state in across restarts (default: an emptyDir).")
	fs.StringVar(&s.Proxy, "proxy", "", "HTTP proxy (http://HOST:PORT) the syncer reaches the server through.")
}

func runE(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	if o.uninstall {
		if o.syncTarget != "" {
			return fmt.Errorf("--uninstall needs no --sync-target: the syncer's objects are named by --namespace")
		}
		data, err := packaging.UninstallManifest(o.syncer.Namespace)
		if err != nil {
			return err
		}
		_, err = streams.Out.Write(data)
		return err
	}
	if o.syncTarget == "" {
		return fmt.Errorf("--sync-target INVENTORY-SPACE/NAME is required: the SyncTarget whose syncer it is")
	}
	inv, name, err := auth.ParseSyncTargetRef(o.syncTarget)
	if err != nil {
		return fmt.Errorf("--sync-target: %w", err)
	}
	if err := center.ValidateTTL(o.ttl); err != nil {
		return err
	}
	if err := o.syncer.Validate(); err != nil {
		return err
	}
	c, err := center.Connect(&o.client)
	if err != nil {
		return err
	}
	if o.syncer.Server, err = c.ServerURL(o.server); err != nil {
		return err
	}
	return Print(ctx, c, inv, name, &o.syncer, o.ttl, streams)
}

// Print mints a token for the SyncTarget inv/name, reads what is placed on
// it, and prints the in-cluster syncer's manifest; s has its flags' values
// and the server's URL.
func Print(ctx context.Context, c *center.Center, inv, name string, s *packaging.InClusterSyncer, ttl time.Duration, streams iostreams.IOStreams) error {
	st, err := c.SyncTarget(ctx, "--sync-target", inv, name)
	if err != nil {
		return err
	}
	rules, _, err := c.PlacedRules(ctx, inv, st)
	if err != nil {
		return err
	}
	tok, note, err := c.SyncerToken(ctx, inv, st, ttl, "made by kubestellar syncer manifest")
	if err != nil {
		return err
	}
	s.SyncTarget, s.Token, s.Rules = name, tok, rules
	data, err := s.Manifest()
	if err != nil {
		return err
	}
	fmt.Fprintln(streams.ErrOut, note)
	switch {
	case s.RBACMode == packaging.RBACClusterAdmin:
		fmt.Fprintln(streams.ErrOut, "the syncer may do anything in the edge cluster (--rbac-mode cluster-admin)")
	case len(rules) == 0:
		fmt.Fprintf(streams.ErrOut, "nothing is placed on %s/%s yet: the syncer may manage namespaces only, until 'kubestellar syncer rbac --sync-target %s/%s' grants what later placements need\n", inv, name, inv, name)
	default:
		fmt.Fprintf(streams.ErrOut, "the syncer may manage what is placed on %s/%s now: %s (ClusterRole kubestellar-syncer:%s:placed)\n", inv, name, packaging.DescribeRules(rules), s.Namespace)
	}
	fmt.Fprintln(streams.ErrOut, "The manifest holds the token: keep it as you would the token. Apply it where kubectl reaches the edge cluster:")
	fmt.Fprintf(streams.ErrOut, "  kubectl apply -f - && kubectl -n %s rollout status deploy/kubestellar-syncer\n", s.Namespace)
	_, err = streams.Out.Write(data)
	return err
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package list is `kubestellar token list`.
package list

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/output"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/server/auth"
)

type options struct {
	client clientconfig.Options
	output output.Options
	// connect is center.Connect, or a fake in tests.
	connect func(*clientconfig.Options) (*center.Center, error)
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{connect: center.Connect}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the syncer tokens (never their secrets)",
		Long: `List the server's tokens, syncer and user tokens, never their secrets.

-o json and yaml print each as a Token (apiVersion kubestellar.io/v1alpha1,
the CLI's view of the Secret that holds it, without the secret); -o name
prints token/ID; -o wide adds the UID of the SyncTarget a syncer token is
bound to.`,
		Example: `  kubestellar token list
  kubestellar token list -o yaml
  kubestellar token list -o name | xargs -n1 basename | xargs -n1 kubestellar token revoke`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.client.AddFlags(cmd.Flags())
	o.output.AddFlags(cmd.Flags())
	return cmd
}

func runE(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	if err := o.output.Validate(); err != nil {
		return err
	}
	c, err := o.connect(&o.client)
	if err != nil {
		return err
	}
	tokens, err := auth.ListTokens(ctx, c.Root)
	if err != nil {
		return err
	}
	now := time.Now()
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	columns := []output.Column{{Name: "ID"}, {Name: "SYNC-TARGET"}, {Name: "USER"}, {Name: "GROUPS"}, {Name: "EXPIRES"}, {Name: "DESCRIPTION"},
		{Name: "SYNC-TARGET-UID", Wide: true}}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	var rows [][]string
	for _, t := range tokens {
		rows = append(rows, []string{t.ID, dash(t.SyncTargetRef()), dash(t.User), dash(strings.Join(t.Groups, ",")),
			center.DescribeExpiration(t, now), t.Description, dash(string(t.SyncTargetUID))})
		list.Items = append(list.Items, tokenObject(t))
	}
	return o.output.Print(streams.Out, list, columns, rows)
}

// tokenObject is the CLI's view of a token, for -o json, yaml and name:
// what the Secret holding it says, but never its secret nor its hash.
func tokenObject(t auth.TokenInfo) unstructured.Unstructured {
	obj := map[string]any{"apiVersion": "kubestellar.io/v1alpha1", "kind": "Token", "metadata": map[string]any{"name": t.ID}}
	set := func(key string, value any) {
		switch v := value.(type) {
		case string:
			if v == "" {
				return
			}
		case []any:
			if len(v) == 0 {
				return
			}
		}
		obj[key] = value
	}
	groups := make([]any, len(t.Groups))
	for i, g := range t.Groups {
		groups[i] = g
	}
	set("user", t.User)
	set("groups", groups)
	set("inventorySpace", t.InventorySpace)
	set("syncTarget", t.SyncTarget)
	set("syncTargetUID", string(t.SyncTargetUID))
	if !t.Expiration.IsZero() {
		obj["expiration"] = t.Expiration.UTC().Format(time.RFC3339)
	}
	set("description", t.Description)
	return unstructured.Unstructured{Object: obj}
}

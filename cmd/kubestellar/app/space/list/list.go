// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package list is `kubestellar space list`.
package list

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/spacecontroller"
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
		Short:   "List the spaces of the server",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.client.AddFlags(cmd.Flags())
	return cmd
}

func runE(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	loaded, err := o.client.Load()
	if err != nil {
		return err
	}
	client, err := loaded.Dynamic(spaces.Root)
	if err != nil {
		return err
	}
	list, err := client.Resource(spacecontroller.SpacesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing spaces: %w", err)
	}
	w := tabwriter.NewWriter(streams.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tTYPE\tPHASE\tURL\tAGE")
	fmt.Fprintf(w, "%s\t\t%s\t%s\t\n", spaces.Root, "Ready", loaded.BaseURL)
	for _, item := range list.Items {
		phase, _, _ := unstructured.NestedString(item.Object, "status", "phase")
		spaceType, _, _ := unstructured.NestedString(item.Object, "spec", "type")
		age := duration.HumanDuration(time.Since(item.GetCreationTimestamp().Time))
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", item.GetName(), spaceType, phase, loaded.BaseURL+spaces.URLPath(item.GetName()), age)
	}
	return w.Flush()
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package list is `kubestellar space list`.
package list

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/output"
	"github.com/kubestellar/kubestellar/spaces"
)

type options struct {
	client clientconfig.Options
	output output.Options
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the spaces of the server",
		Long: `List the spaces you may use: the root space, then every Space object.

-o json, yaml and name print the Space objects (the root space is none);
-o wide adds each space's owner (the user who created it, none for an
admin's), the inventories a WDS may place on, and what a tenant space
stores against its limits (objects, bytes), as the server last counted.`,
		Example: `  kubestellar space list
  kubestellar space list -o wide --no-headers
  kubestellar space list -o name`,
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
	loaded, err := o.client.Load()
	if err != nil {
		return err
	}
	client, err := loaded.Dynamic(spaces.Root)
	if err != nil {
		return err
	}
	list, err := client.Resource(tenancyv1alpha1.SpacesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing spaces: %w", err)
	}
	columns := []output.Column{{Name: "NAME"}, {Name: "TYPE"}, {Name: "PHASE"}, {Name: "URL"}, {Name: "AGE"},
		{Name: "OWNER", Wide: true}, {Name: "INVENTORIES", Wide: true}, {Name: "OBJECTS", Wide: true}, {Name: "BYTES", Wide: true}}
	// As kubectl's wide columns: <none> for nothing.
	none := func(s string) string {
		if s == "" {
			return "<none>"
		}
		return s
	}
	rows := [][]string{{spaces.Root, "", "Ready", loaded.BaseURL, "", "<none>", "<none>", "<none>", "<none>"}}
	for _, item := range list.Items {
		phase, _, _ := unstructured.NestedString(item.Object, "status", "phase")
		spaceType, _, _ := unstructured.NestedString(item.Object, "spec", "type")
		inventories, _, _ := unstructured.NestedStringSlice(item.Object, "spec", "inventorySpaces")
		age := duration.HumanDuration(time.Since(item.GetCreationTimestamp().Time))
		rows = append(rows, []string{item.GetName(), spaceType, string(phase), loaded.BaseURL + spaces.URLPath(item.GetName()), age,
			none(item.GetAnnotations()[tenancyv1alpha1.SpaceOwnerAnnotation]), none(strings.Join(inventories, ",")),
			usage(item.Object, "objects", strconv.FormatInt), usage(item.Object, "bytes", humanBytes)})
	}
	return o.output.Print(streams.Out, list, columns, rows)
}

// usage is a space's usage of one limit, "USED/LIMIT" ("USED" without a
// limit), or <none> for a space the limits do not hold in.
func usage(space map[string]any, field string, format func(int64, int) string) string {
	used, found, _ := unstructured.NestedInt64(space, "status", "usage", field)
	if !found {
		return "<none>"
	}
	out := format(used, 10)
	var limit int64
	switch v, _, _ := unstructured.NestedFieldNoCopy(space, "status", "limits", field); v := v.(type) {
	case int64:
		limit = v
	case string:
		if q, err := resource.ParseQuantity(v); err == nil {
			limit = q.Value()
		}
	}
	if limit > 0 {
		out += "/" + format(limit, 10)
	}
	return out
}

// humanBytes prints a byte count in binary units, as kubectl prints
// quantities: 5.5Mi.
func humanBytes(n int64, _ int) string {
	units := []string{"", "Ki", "Mi", "Gi", "Ti"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10)
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package create is `kubestellar synctarget create`: the center side of
// adding an edge cluster. It makes the SyncTarget, a Location for it and a
// syncer token, and prints the `kubestellar syncer join` command to run at
// the edge.
package create

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/manifest"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/packaging"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
)

// NameLabel is the label every SyncTarget it makes carries, which its
// Location selects.
const NameLabel = "name"

var (
	syncTargetsGVR = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")
	locationsGVR   = edgev2alpha1.SchemeGroupVersion.WithResource("locations")
)

type options struct {
	client         clientconfig.Options
	inventorySpace string
	labels         map[string]string
	location       string
	server         string
	ttl            time.Duration
	output         string
	syncer         packaging.InClusterSyncer
}

// The forms of --output.
const (
	outputJoin     = "join"
	outputManifest = "manifest"
)

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "create NAME --inventory-space SPACE",
		Short: "Add an edge cluster: a SyncTarget, its Location and a syncer token",
		Long: `Create (or update the labels of) the SyncTarget NAME in an inventory space,
a Location selecting it (labelled like it, so EdgePlacements can select it),
and a token for its syncer. Print the command that joins the edge cluster:
only that goes to stdout, so scripts can capture it.

With --output manifest, print instead the manifest that runs the syncer
inside the edge cluster (as 'kubestellar syncer manifest' does), for kubectl
apply there; --image, --namespace, --rbac-mode and the rest shape it.`,
		Example: `  kubestellar space create inv1 --type inventory
  kubestellar synctarget create edge1 --inventory-space inv1 --labels env=prod,region=east
  kubestellar synctarget create edge1 --inventory-space inv1 --labels env=prod --output manifest > edge1-syncer.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runE(cmd.Context(), o, args[0], streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.inventorySpace, "inventory-space", "", "Space holding the SyncTarget (required; it must exist).")
	cmd.Flags().StringToStringVar(&o.labels, "labels", nil, "Labels of the SyncTarget and its Location, as k=v,k2=v2 (the SyncTarget also gets name=NAME).")
	cmd.Flags().StringVar(&o.location, "location", "", "Name of the Location (default: NAME).")
	cmd.Flags().StringVar(&o.server, "server", "", "URL the edge reaches the server at (default: the kubeconfig's server).")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "How long the syncer token works, e.g. 24h (default: 0, for ever).")
	cmd.Flags().StringVarP(&o.output, "output", "o", outputJoin, "What to print: join (the command that joins the edge cluster from a host) or manifest (the objects that run the syncer inside the edge cluster).")
	manifest.AddSyncerFlags(cmd.Flags(), &o.syncer)
	return cmd
}

func (o *options) validate(name string) error {
	if err := auth.ValidateSyncTargetName(name); err != nil {
		return err
	}
	if o.inventorySpace == "" {
		return fmt.Errorf("--inventory-space is required: the space holding the SyncTarget")
	}
	if err := spaces.ValidateName(o.inventorySpace); err != nil {
		return fmt.Errorf("--inventory-space: %w", err)
	}
	if o.location == "" {
		o.location = name
	}
	if errs := validation.IsDNS1123Subdomain(o.location); len(errs) > 0 {
		return fmt.Errorf("--location: invalid name %q: %s", o.location, errs[0])
	}
	for k, v := range o.labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("--labels: invalid key %q: %s", k, errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("--labels: invalid value %q of %s: %s", v, k, errs[0])
		}
	}
	if v, ok := o.labels[NameLabel]; ok && v != name {
		return fmt.Errorf("--labels: %s=%s conflicts with the SyncTarget's name %q (%s is set to NAME)", NameLabel, v, name, NameLabel)
	}
	if k, ok := o.labels[center.MadeByLabel]; ok {
		return fmt.Errorf("--labels: %s=%s is reserved", center.MadeByLabel, k)
	}
	if o.server != "" {
		if _, err := center.NormalizeServerURL(o.server); err != nil {
			return err
		}
	}
	switch o.output {
	case "", outputJoin, outputManifest:
	default:
		return fmt.Errorf("--output %q must be %s or %s", o.output, outputJoin, outputManifest)
	}
	if err := o.syncer.Validate(); err != nil {
		return err
	}
	return center.ValidateTTL(o.ttl)
}

func runE(ctx context.Context, o *options, name string, streams iostreams.IOStreams) error {
	if err := o.validate(name); err != nil {
		return err
	}
	c, err := center.Connect(&o.client)
	if err != nil {
		return err
	}
	server, err := c.ServerURL(o.server)
	if err != nil {
		return err
	}
	if err := c.RequireSpace(ctx, "--inventory-space", o.inventorySpace); err != nil {
		return err
	}
	caPEM, err := c.CACerts(ctx)
	if err != nil {
		return err
	}
	inv := spaces.WithSpace(ctx, o.inventorySpace)

	stLabels := maps.Clone(o.labels)
	if stLabels == nil {
		stLabels = map[string]string{}
	}
	stLabels[NameLabel] = name
	uid, msg, err := ensureSyncTarget(inv, c.Dynamic.Resource(syncTargetsGVR), name, stLabels)
	if err != nil {
		return err
	}
	fmt.Fprintf(streams.ErrOut, "SyncTarget %q %s in space %q\n", name, msg, o.inventorySpace)

	msg, err = ensureLocation(inv, c.Dynamic.Resource(locationsGVR), o.location, name, o.labels)
	if err != nil {
		return err
	}
	fmt.Fprintf(streams.ErrOut, "Location %q %s\n", o.location, msg)

	if o.output == outputManifest {
		o.syncer.Server = server
		return manifest.Print(ctx, c, o.inventorySpace, name, &o.syncer, o.ttl, streams)
	}
	tok, info, err := auth.CreateToken(ctx, c.Root, auth.NewTokenOptions{InventorySpace: o.inventorySpace, SyncTarget: name, SyncTargetUID: uid,
		TTL: o.ttl, Description: "made by kubestellar synctarget create", CAPEM: caPEM})
	if err != nil {
		return err
	}
	fmt.Fprintf(streams.ErrOut, "token %s created for %s (expires: %s)\n", info.ID, info.SyncTargetRef(), center.DescribeExpiration(info, time.Now()))
	printJoin(streams, server, tok.String(), name)
	return nil
}

// printJoin prints the command that joins the edge cluster, the only line
// that goes to stdout, and on stderr where to run it and its service form.
func printJoin(streams iostreams.IOStreams, server, token, name string) {
	fmt.Fprintln(streams.ErrOut, "Run this where kubectl reaches the edge cluster (add --kubeconfig PATH for an edge cluster other than the default kubeconfig's):")
	fmt.Fprintf(streams.Out, "kubestellar syncer join --server %s --token %s --sync-target %s\n", server, token, name)
	fmt.Fprintf(streams.ErrOut, "Or, to run it as a systemd service there (kubestellar-syncer@%s):\n  sudo kubestellar syncer install --server %s --token %s --sync-target %s\n",
		name, server, token, name)
}

// ensureSyncTarget creates the SyncTarget, or adds the labels to the one
// there is; it returns its UID (which the token is bound to) and what it did.
func ensureSyncTarget(ctx context.Context, client dynamic.ResourceInterface, name string, labels map[string]string) (types.UID, string, error) {
	have, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		st := &edgev2alpha1.SyncTarget{
			TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "SyncTarget"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		}
		u, err := toUnstructured(st)
		if err != nil {
			return "", "", err
		}
		created, err := client.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return "", "", fmt.Errorf("creating SyncTarget %q: %w", name, err)
		}
		return created.GetUID(), "created", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading SyncTarget %q: %w", name, err)
	}
	if have.GetDeletionTimestamp() != nil {
		return "", "", fmt.Errorf("SyncTarget %q is being deleted: wait until it is gone, then create it again", name)
	}
	if _, changed := merge(have.GetLabels(), labels); !changed {
		return have.GetUID(), "exists, unchanged", nil
	}
	// A merge patch of the labels alone: the server's controllers write the
	// SyncTarget's status meanwhile, which an update of the whole object
	// would meet as a conflict.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return "", "", err
	}
	if _, err := client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return "", "", fmt.Errorf("updating the labels of SyncTarget %q: %w", name, err)
	}
	return have.GetUID(), "exists, labels updated (" + describe(labels) + ")", nil
}

// ensureLocation creates the Location selecting the SyncTarget, or updates
// the one there is if this command made it; one made otherwise is left
// alone.
func ensureLocation(ctx context.Context, client dynamic.ResourceInterface, name, syncTarget string, userLabels map[string]string) (string, error) {
	labels := maps.Clone(userLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[center.MadeByLabel] = center.MadeBySyncTargetCreate
	want := &edgev2alpha1.Location{
		TypeMeta: metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "Location"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{center.SyncTargetAnnotation: syncTarget}},
		Spec: edgev2alpha1.LocationSpec{
			Resource:         edgev2alpha1.GroupVersionResource{Group: edgev2alpha1.GroupName, Version: edgev2alpha1.SchemeGroupVersion.Version, Resource: "synctargets"},
			InstanceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NameLabel: syncTarget}},
		},
	}
	u, err := toUnstructured(want)
	if err != nil {
		return "", err
	}
	have, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("creating Location %q: %w", name, err)
		}
		return "created", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading Location %q: %w", name, err)
	}
	if have.GetLabels()[center.MadeByLabel] != center.MadeBySyncTargetCreate {
		return "exists and was not made by this command: left as it is", nil
	}
	merged, labelsChanged := merge(have.GetLabels(), labels)
	have.SetLabels(merged)
	annotations := have.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[center.SyncTargetAnnotation] = syncTarget
	have.SetAnnotations(annotations)
	have.Object["spec"] = u.Object["spec"]
	if _, err := client.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("updating Location %q: %w", name, err)
	}
	if labelsChanged {
		return "exists, labels updated", nil
	}
	return "exists", nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// merge returns have with want's labels set, and whether that changed it.
func merge(have, want map[string]string) (map[string]string, bool) {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	changed := false
	for k, v := range want {
		if old, ok := out[k]; !ok || old != v {
			out[k], changed = v, true
		}
	}
	return out, changed
}

func describe(labels map[string]string) string {
	var kv []string
	for k, v := range labels {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

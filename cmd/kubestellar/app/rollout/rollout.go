// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rollout is `kubestellar rollout status|pause|resume WDS/NAME`:
// where a Progressive EdgePlacement's rollout is, per wave and per edge,
// and the switch that stops it from reaching more edges.
package rollout

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/spaces"
)

var placementsGVR = edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements")

type options struct {
	client  clientconfig.Options
	watch   bool
	timeout time.Duration
}

// NewCommand returns `kubestellar rollout` with its subcommands.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	cmd := &cobra.Command{Use: "rollout", Short: "Follow, pause and resume the rollout of a Progressive EdgePlacement"}
	cmd.AddCommand(newStatusCommand(streams), newSwitchCommand(streams, true), newSwitchCommand(streams, false))
	return cmd
}

func newStatusCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "status WDS/NAME",
		Short: "Show where a rollout is, and wait until it is complete",
		Long: `Print where the rollout of EdgePlacement NAME in space WDS is: its revision,
each wave's destinations (updated, healthy, failed, waiting) and the edges
that failed or wait, with why. With --watch (the default) it prints again at
each change and returns once the rollout is complete, or fails once it is
paused, as 'kubectl rollout status' does.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runStatus(cmd.Context(), o, args[0], streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", true, "Wait until the rollout is complete (or paused), printing each change.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "How long to wait with --watch (0: no limit).")
	return cmd
}

func newSwitchCommand(streams iostreams.IOStreams, pause bool) *cobra.Command {
	o := &options{}
	verb, short := "resume", "Let a paused rollout go on from where it stopped"
	if pause {
		verb, short = "pause", "Stop a rollout from reaching more edges (those it reached keep the new revision)"
	}
	cmd := &cobra.Command{
		Use:   verb + " WDS/NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSwitch(cmd.Context(), o, args[0], pause, streams)
		},
	}
	o.client.AddFlags(cmd.Flags())
	return cmd
}

// target parses WDS/NAME and connects to the WDS.
func target(o *options, arg string) (dynamic.ResourceInterface, string, string, error) {
	wds, name, ok := strings.Cut(arg, "/")
	if !ok || wds == "" || name == "" || strings.Contains(name, "/") {
		return nil, "", "", fmt.Errorf("%q: name the placement as WDS/NAME (the space and the EdgePlacement), as in wds1/shop", arg)
	}
	if err := spaces.ValidateName(wds); err != nil {
		return nil, "", "", fmt.Errorf("%q: %w", arg, err)
	}
	loaded, err := o.client.Load()
	if err != nil {
		return nil, "", "", err
	}
	dyn, err := loaded.Dynamic(wds)
	if err != nil {
		return nil, "", "", err
	}
	return dyn.Resource(placementsGVR), wds, name, nil
}

func get(ctx context.Context, rc dynamic.ResourceInterface, wds, name string) (*edgev2alpha1.EdgePlacement, error) {
	u, err := rc.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("there is no EdgePlacement %q in space %q", name, wds)
	}
	if err != nil {
		return nil, err
	}
	ep := &edgev2alpha1.EdgePlacement{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ep); err != nil {
		return nil, fmt.Errorf("reading EdgePlacement %s/%s: %w", wds, name, err)
	}
	if !ep.Spec.Progressive() {
		return nil, fmt.Errorf("EdgePlacement %s/%s gives every change to every edge at once: it has no rollout (set spec.rollout.strategy: Progressive)", wds, name)
	}
	return ep, nil
}

func runStatus(ctx context.Context, o *options, arg string, streams iostreams.IOStreams) error {
	rc, wds, name, err := target(o, arg)
	if err != nil {
		return err
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	last := ""
	var result error
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		ep, err := get(ctx, rc, wds, name)
		if err != nil {
			return false, err
		}
		var b strings.Builder
		done := describe(&b, wds, ep)
		if text := b.String(); text != last {
			fmt.Fprint(streams.Out, text)
			last = text
		}
		st := ep.Status.Rollout
		switch {
		case st != nil && st.Phase == edgev2alpha1.RolloutPhasePaused && o.watch:
			result = fmt.Errorf("the rollout is paused: %s (kubestellar rollout resume %s/%s, once that is dealt with)", st.Message, wds, name)
			return true, nil
		case done || !o.watch:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() != nil && o.timeout > 0 {
			return fmt.Errorf("the rollout of %s/%s is not complete after --timeout %s", wds, name, o.timeout)
		}
		return err
	}
	return result
}

// describe writes the rollout's status and reports whether it is complete.
func describe(w io.Writer, wds string, ep *edgev2alpha1.EdgePlacement) bool {
	st := ep.Status.Rollout
	if st == nil {
		fmt.Fprintf(w, "EdgePlacement %s/%s: waiting for the server to start its rollout\n", wds, ep.Name)
		return false
	}
	fmt.Fprintf(w, "EdgePlacement %s/%s: %s, revision %s", wds, ep.Name, st.Phase, st.Revision)
	if st.CompletedRevision != "" && st.CompletedRevision != st.Revision {
		fmt.Fprintf(w, " (last complete: %s)", st.CompletedRevision)
	}
	fmt.Fprintln(w)
	if st.Message != "" {
		fmt.Fprintf(w, "  %s\n", st.Message)
	}
	for _, wv := range st.Waves {
		mark := " "
		if wv.Name == st.CurrentWave && st.Phase != edgev2alpha1.RolloutPhaseComplete {
			mark = ">"
		}
		fmt.Fprintf(w, "%s wave %-12s %d destinations: %d updated, %d healthy, %d failed, %d waiting\n",
			mark, wv.Name, wv.Destinations, wv.Updated, wv.Healthy, wv.Failed, wv.Waiting)
	}
	for _, d := range st.Destinations {
		fmt.Fprintf(w, "  %s (wave %s): %s", d.SyncTarget, d.Wave, d.State)
		if d.Message != "" {
			fmt.Fprintf(w, ": %s", d.Message)
		}
		fmt.Fprintln(w)
	}
	return st.Phase == edgev2alpha1.RolloutPhaseComplete
}

func runSwitch(ctx context.Context, o *options, arg string, pause bool, streams iostreams.IOStreams) error {
	rc, wds, name, err := target(o, arg)
	if err != nil {
		return err
	}
	ep, err := get(ctx, rc, wds, name)
	if err != nil {
		return err
	}
	verb := map[bool]string{true: "paused", false: "resumed"}[pause]
	if ep.Spec.Rollout.Paused == pause {
		fmt.Fprintf(streams.Out, "EdgePlacement %s/%s: the rollout was already %s\n", wds, name, verb)
		return nil
	}
	patch := fmt.Sprintf(`{"spec":{"rollout":{"paused":%t}}}`, pause)
	if _, err := rc.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("updating EdgePlacement %s/%s: %w", wds, name, err)
	}
	fmt.Fprintf(streams.Out, "EdgePlacement %s/%s: rollout %s\n", wds, name, verb)
	return nil
}

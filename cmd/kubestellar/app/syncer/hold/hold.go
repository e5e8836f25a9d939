// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hold is `kubestellar syncer hold` and `kubestellar syncer
// release`, run at the edge: they write and remove the hold in the
// syncer's data directory, which the running syncer follows.
package hold

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/syncer"
)

type options struct {
	dataDir, syncTarget string
	until               string
	duration            time.Duration
	reason              string
	now                 func() time.Time
}

func (o *options) addDirFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "The syncer's data directory (default: the syncer's default for --sync-target).")
	cmd.Flags().StringVar(&o.syncTarget, "sync-target", "", "The SyncTarget the syncer serves, for its default data directory.")
}

// dir is the syncer's data directory the flags name.
func (o *options) dir() (string, error) {
	switch {
	case o.dataDir != "":
		return o.dataDir, nil
	case o.syncTarget != "":
		return syncer.DefaultDataDir(o.syncTarget), nil
	}
	return "", errors.New("--data-dir or --sync-target is required: the syncer's data directory, as 'syncer join' was given it")
}

// NewCommand returns `syncer hold`.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{now: time.Now}
	cmd := &cobra.Command{
		Use:   "hold (--data-dir DIR | --sync-target NAME) [--until TIME | --for DURATION] [--reason TEXT]",
		Short: "At the edge: hold every change to this edge cluster until released",
		Long: `Hold every change the syncer would make to its edge cluster: no object of
the mailbox is created, updated or deleted there, and no drift is reverted,
until 'kubestellar syncer release' or until --until (or --for) passes.
Deletes wait too: an object removed from the mailbox stays at the edge
until the hold ends. The syncer goes on reporting status and upsyncing,
and its SyncTarget shows the hold (status.hold: since, until, the reason
and how many objects wait; column HELD of 'kubectl get synctargets -o wide').

Run it where the syncer runs (on its host, or with kubectl exec in its pod):
the hold is written into the syncer's data directory, so it is the edge's.
It holds across restarts of the syncer and while the center cannot be
reached, and the center cannot lift it. A hold replaces the one before.`,
		Example: `  kubestellar syncer hold --sync-target edge1 --for 8h --reason "store open"
  kubectl exec -n kubestellar-syncer deploy/kubestellar-syncer -- kubestellar syncer hold --data-dir /var/lib/kubestellar-syncer --until 2026-12-24T06:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runHold(o, streams) },
	}
	o.addDirFlags(cmd)
	cmd.Flags().StringVar(&o.until, "until", "", "When the hold ends by itself, in RFC 3339 (2026-12-24T06:00:00Z); default: when released.")
	cmd.Flags().DurationVar(&o.duration, "for", 0, "How long the hold lasts (8h, 90m), instead of --until.")
	cmd.Flags().StringVar(&o.reason, "reason", "", fmt.Sprintf("Why the edge holds, shown on its SyncTarget (at most %d bytes).", edgev2alpha1.MaxHoldReasonLength))
	return cmd
}

// NewReleaseCommand returns `syncer release`.
func NewReleaseCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{now: time.Now}
	cmd := &cobra.Command{
		Use:   "release (--data-dir DIR | --sync-target NAME)",
		Short: "At the edge: end a hold; the syncer brings every object that waited in step",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return runRelease(o, streams) },
	}
	o.addDirFlags(cmd)
	return cmd
}

// hold makes the hold the flags describe.
func (o *options) hold() (syncer.Hold, error) {
	now := o.now()
	h := syncer.Hold{Since: now.UTC().Truncate(time.Second), Reason: o.reason}
	switch {
	case o.until != "" && o.duration != 0:
		return h, errors.New("--until and --for both say when the hold ends: give one")
	case o.until != "":
		t, err := time.Parse(time.RFC3339, o.until)
		if err != nil {
			return h, fmt.Errorf("--until %q is not a time in RFC 3339 (2026-12-24T06:00:00Z): %w", o.until, err)
		}
		if !t.After(now) {
			return h, fmt.Errorf("--until %s has passed", o.until)
		}
		h.Until = &t
	case o.duration < 0:
		return h, fmt.Errorf("--for %s is negative", o.duration)
	case o.duration > 0:
		t := now.Add(o.duration).UTC().Truncate(time.Second)
		h.Until = &t
	}
	if len(o.reason) > edgev2alpha1.MaxHoldReasonLength {
		return h, fmt.Errorf("--reason is %d bytes; at most %d", len(o.reason), edgev2alpha1.MaxHoldReasonLength)
	}
	return h, nil
}

func runHold(o *options, streams iostreams.IOStreams) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	h, err := o.hold()
	if err != nil {
		return err
	}
	if err := syncer.WriteHold(dir, h); err != nil {
		return fmt.Errorf("writing the hold into %s: %w", dir, err)
	}
	until := "until released (kubestellar syncer release)"
	if h.Until != nil {
		until = "until " + h.Until.Format(time.RFC3339)
	}
	fmt.Fprintf(streams.Out, "holding every change to this edge cluster %s (%s)\n", until, dir)
	return nil
}

func runRelease(o *options, streams iostreams.IOStreams) error {
	dir, err := o.dir()
	if err != nil {
		return err
	}
	was, err := syncer.ReleaseHold(dir)
	if err != nil {
		return fmt.Errorf("removing the hold from %s: %w", dir, err)
	}
	if !was {
		fmt.Fprintf(streams.Out, "no hold in %s: nothing to release\n", dir)
		return nil
	}
	fmt.Fprintf(streams.Out, "released: the syncer brings what waited in step (%s)\n", dir)
	return nil
}

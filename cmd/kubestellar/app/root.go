// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the kubestellar command line. Each command lives in a
// package of its own (<verb>/<noun>/, or <noun>/ for single words), with a
// private options struct, NewCommand and runE; Run executes the whole CLI
// from arguments and streams, so tests can drive it in-process.
package app

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/dashboard"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/kubeconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/rollout"
	serverbackup "github.com/kubestellar/kubestellar/cmd/kubestellar/app/server/backup"
	serverinstall "github.com/kubestellar/kubestellar/cmd/kubestellar/app/server/install"
	serverrestore "github.com/kubestellar/kubestellar/cmd/kubestellar/app/server/restore"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/server/start"
	serveruninstall "github.com/kubestellar/kubestellar/cmd/kubestellar/app/server/uninstall"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/space/create"
	spacedelete "github.com/kubestellar/kubestellar/cmd/kubestellar/app/space/delete"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/space/list"
	syncerhold "github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/hold"
	syncerinstall "github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/install"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/join"
	syncermanifest "github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/manifest"
	syncerrbac "github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/rbac"
	synceruninstall "github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/uninstall"
	synctargetcreate "github.com/kubestellar/kubestellar/cmd/kubestellar/app/synctarget/create"
	synctargetdelete "github.com/kubestellar/kubestellar/cmd/kubestellar/app/synctarget/delete"
	tokencreate "github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/create"
	tokenlist "github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/list"
	tokenrevoke "github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/revoke"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/version"
	kubestellarversion "github.com/kubestellar/kubestellar/internal/version"
)

// IOStreams are the standard streams of a command.
type IOStreams = iostreams.IOStreams

// Run runs the CLI with args and returns the process exit code.
func Run(ctx context.Context, args []string, streams IOStreams) int {
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(streams.ErrOut, "error:", err)
		return 1
	}
	return 0
}

// NewCommand returns the root command.
func NewCommand(streams IOStreams) *cobra.Command {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd := &cobra.Command{
		Use:           "kubestellar",
		Short:         "Edge and multi-cluster workload management in one binary",
		Long:          "kubestellar runs a multi-cluster workload-management control plane (server start), manages its spaces, and runs the edge syncer.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			// kine logs through logrus; keep it quiet unless asked for detail.
			logrus.SetOutput(streams.ErrOut)
			if v, err := strconv.Atoi(klogFlags.Lookup("v").Value.String()); err == nil && v >= 4 {
				logrus.SetLevel(logrus.DebugLevel)
			} else {
				logrus.SetLevel(logrus.WarnLevel)
			}
		},
	}
	// --version prints what `kubestellar version` does: in an image with
	// no shell, it is the quickest way to ask a binary what it is.
	cmd.Version = kubestellarversion.Line()
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))

	server := &cobra.Command{Use: "server", Short: "Run and manage the kubestellar server"}
	server.AddCommand(start.NewCommand(streams), serverinstall.NewCommand(streams), serveruninstall.NewCommand(streams),
		serverbackup.NewCommand(streams), serverrestore.NewCommand(streams))
	space := &cobra.Command{Use: "space", Short: "Create, list and delete spaces (logical clusters)"}
	space.AddCommand(create.NewCommand(streams), list.NewCommand(streams), spacedelete.NewCommand(streams))
	syncer := &cobra.Command{Use: "syncer", Short: "Run the edge syncer, install it as a service, or print the manifest that runs it in its edge cluster"}
	syncer.AddCommand(join.NewCommand(streams), syncerinstall.NewCommand(streams), synceruninstall.NewCommand(streams),
		syncermanifest.NewCommand(streams), syncerrbac.NewCommand(streams),
		syncerhold.NewCommand(streams), syncerhold.NewReleaseCommand(streams))
	synctarget := &cobra.Command{Use: "synctarget", Aliases: []string{"st"}, Short: "Add and remove edge clusters (SyncTargets) and make their syncer tokens"}
	synctarget.AddCommand(synctargetcreate.NewCommand(streams), synctargetdelete.NewCommand(streams))
	token := &cobra.Command{Use: "token", Short: "Create, list and revoke syncer tokens"}
	token.AddCommand(tokencreate.NewCommand(streams), tokenlist.NewCommand(streams), tokenrevoke.NewCommand(streams))
	cmd.AddCommand(server, space, syncer, synctarget, token, rollout.NewCommand(streams), kubeconfig.NewCommand(streams), version.NewCommand(streams), dashboard.NewCommand(streams))
	return cmd
}

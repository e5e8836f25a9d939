// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kube-control-plane runs one Kubernetes control-plane component:
// kube-apiserver, kube-controller-manager or kube-scheduler. The component is
// chosen by the name the binary is called by (argv[0], so it can be symlinked)
// or else by its first argument:
//
//	kube-control-plane kube-apiserver --etcd-servers=... [flags]
//
// The three components are linked into one binary to share the (long) build,
// but each runs in a process of its own: their cobra commands set up logging
// and signal handling once per process, so they cannot share one.
//
// The Kubernetes version is stamped at link time through
// -X k8s.io/component-base/version.gitVersion=v1.37.x (and friends).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // for CronJob time zone support, as upstream

	"github.com/spf13/cobra"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var components = map[string]func() *cobra.Command{
	"kube-apiserver":          func() *cobra.Command { return apiserver.NewAPIServerCommand() },
	"kube-controller-manager": func() *cobra.Command { return controllermanager.NewControllerManagerCommand() },
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name, args, ok := pick(os.Args)
	if !ok {
		fmt.Fprintf(os.Stderr, "usage: %s {%s} [flags]\n", filepath.Base(os.Args[0]), strings.Join(names(), "|"))
		os.Exit(2)
	}
	command := components[name]()
	command.SetArgs(args)
	os.Exit(cli.Run(command))
}

// pick returns the component named by argv[0] or else by argv[1], and the
// arguments that remain for it.
func pick(argv []string) (string, []string, bool) {
	if len(argv) == 0 {
		return "", nil, false
	}
	if _, ok := components[filepath.Base(argv[0])]; ok {
		return filepath.Base(argv[0]), argv[1:], true
	}
	if len(argv) > 1 {
		if _, ok := components[argv[1]]; ok {
			return argv[1], argv[2:], true
		}
	}
	return "", nil, false
}

func names() []string {
	out := make([]string, 0, len(components))
	for n := range components {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

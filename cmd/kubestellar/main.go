// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubestellar is the whole kubestellar control plane in one binary:
// the server (`kubestellar server start`), its client commands, and the edge
// syncer.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], app.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}

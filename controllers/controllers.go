// Package controllers runs kubestellar's workload-management controllers
// in the server process. Each controller is a package of its own; this file
// is the one place that registers them all.
package controllers

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/mailbox"
	"github.com/kubestellar/kubestellar/controllers/scheduler"
)

// Start starts every controller against the server that root (a root-space
// client configuration with full privileges) addresses; they stop with ctx.
func Start(ctx context.Context, root *rest.Config) error {
	clients, err := crossspace.NewClients(root)
	if err != nil {
		return fmt.Errorf("controller clients: %w", err)
	}
	logger := klog.FromContext(ctx)
	go scheduler.New(clients).Run(klog.NewContext(ctx, logger), 2)
	go mailbox.New(clients).Run(klog.NewContext(ctx, logger), 2)
	return nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controllers runs kubestellar's workload-management controllers
// in the server process. Each controller is a package of its own; this file
// is the one place that registers them all.
package controllers

import (
	"context"
	"fmt"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	// Sets client-go's work-queue metrics provider to one in the legacy
	// registry, which the server's /metrics serves: every named queue
	// reports its depth, adds, latency, work duration, retries, unfinished
	// work and longest running processor there. k8s.io/apiserver imports
	// it too; importing it here keeps it should that change. Nothing else
	// may set the provider first (only the first one counts): controller-
	// runtime's metrics package would, into a registry nobody serves.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/mailbox"
	"github.com/kubestellar/kubestellar/controllers/placement"
	"github.com/kubestellar/kubestellar/controllers/scheduler"
	"github.com/kubestellar/kubestellar/controllers/status"
	"github.com/kubestellar/kubestellar/controllers/upsync"
)

// InProcess is what the controllers reach in the server's own process
// rather than through its API; either may be nil.
type InProcess struct {
	// Writer writes the mailbox copies of the resources it serves
	// (placement.StoreWriter).
	Writer placement.StoreWriter
	// Reader lists and watches the resources it serves for the caches
	// that hold every object of a resource, in every space.
	Reader LocalReader
}

// LocalReader lists and watches some resources in the server's process.
type LocalReader = crossspace.LocalReader

// Start starts every controller against the server that root (a root-space
// client configuration with full privileges) addresses; they stop with ctx.
func Start(ctx context.Context, root *rest.Config, local InProcess) error {
	clients, err := crossspace.NewClients(root)
	if err != nil {
		return fmt.Errorf("controller clients: %w", err)
	}
	clients.Local = local.Reader
	ext, err := apiextensionsclient.NewForConfig(root)
	if err != nil {
		return err
	}
	crds := apiextensionsinformers.NewSharedInformerFactory(ext, crossspace.Resync)
	// Workload objects and their mailbox copies are cached once, for both
	// the translator and the status controller.
	resources := clients.NewSharedDynamic()
	// The copies in mailboxes are cached trimmed to what the controllers
	// read of them. Which spaces are mailboxes is known before the caches
	// fill, so that a restart's first list is trimmed too.
	mailboxes := clients.Typed(&tenancyv1alpha1.SpaceList{}, &tenancyv1alpha1.Space{}, cache.ResourceEventHandlerFuncs{})
	resources.TrimCopies(func(space string) bool {
		_, ok := crossspace.SpaceOfType(mailboxes, space, tenancyv1alpha1.SpaceTypeMailbox)
		return ok
	})
	translator := placement.New(clients, crds.Apiextensions().V1().CustomResourceDefinitions().Informer(), resources)
	if local.Writer != nil {
		translator.WriteInProcess(local.Writer)
	}
	statusCtl, err := status.New(clients, resources)
	if err != nil {
		return err
	}
	// Every controller is made before any runs: they share one cache per
	// kind (clients.Typed), and each adds its handler and indexes to it
	// before it fills.
	sched, mailboxCtl, upsyncCtl := scheduler.New(clients), mailbox.New(clients), upsync.New(clients)
	go mailboxes.RunWithContext(ctx)
	go func() {
		if crossspace.WaitForSync(ctx, mailboxes) {
			resources.Start(ctx)
		}
	}()
	crds.Start(ctx.Done())

	go sched.Run(ctx, 2)
	go mailboxCtl.Run(ctx, 2)
	go translator.Run(ctx, 4)
	go statusCtl.Run(ctx, 2)
	go upsyncCtl.Run(ctx, 2)
	klog.FromContext(ctx).V(2).Info("started workload-management controllers")
	return nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controllers makes kubestellar's workload-management controllers
// for the server process. Each controller is a package of its own; this
// file makes them all, around the caches they share. The server runs them
// from its table of control loops (server/loops.go).
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
	// CRDs, when set, are every space's CRDs, each space's own (the
	// server's --crds-per-space); nil: the CRDs are bound to spaces, and
	// read from the root space.
	CRDs Definitions
}

// LocalReader lists and watches some resources in the server's process.
type LocalReader = crossspace.LocalReader

// Definitions say which CRD defines a custom resource in each space.
type Definitions = crossspace.Definitions

// Workloads are the workload-management controllers, made together: they
// share one cache per kind, to which each adds its handlers and indexes
// before it fills. The server's table of control loops (server/loops.go)
// runs each, after StartCaches.
type Workloads struct {
	Scheduler  *scheduler.Controller
	Mailbox    *mailbox.Controller
	Translator *placement.Controller
	Status     *status.Controller
	Upsync     *upsync.Controller

	// startCaches starts the caches the controllers share.
	startCaches func(ctx context.Context)
}

// New makes every workload-management controller, on clients of root (the
// root space, with the server's loopback identity), and local for what
// they reach in the server's own process. Nothing runs until StartCaches
// and each controller's Run.
func New(root *rest.Config, local InProcess) (*Workloads, error) {
	clients, err := crossspace.NewClients(root)
	if err != nil {
		return nil, fmt.Errorf("controller clients: %w", err)
	}
	clients.Local = local.Reader
	ext, err := apiextensionsclient.NewForConfig(root)
	if err != nil {
		return nil, err
	}
	crds := apiextensionsinformers.NewSharedInformerFactory(ext, crossspace.Resync)
	defs := local.CRDs
	if defs == nil {
		defs = crossspace.BoundDefinitions(crds.Apiextensions().V1().CustomResourceDefinitions().Informer())
	}
	// Workload objects and their mailbox copies are cached once, for both
	// the translator and the status controller.
	resources := clients.NewSharedDynamic()
	if defs.PerSpace() {
		// Spaces may define a custom resource's name each its own way:
		// the objects of each definition are read apart.
		if err := resources.ReadByDefinition(defs); err != nil {
			return nil, err
		}
	}
	// The copies in mailboxes are cached trimmed to what the controllers
	// read of them. Which spaces are mailboxes is known before the caches
	// fill, so that a restart's first list is trimmed too.
	mailboxes := clients.Typed(&tenancyv1alpha1.SpaceList{}, &tenancyv1alpha1.Space{}, cache.ResourceEventHandlerFuncs{})
	resources.TrimCopies(func(space string) bool {
		_, ok := crossspace.SpaceOfType(mailboxes, space, tenancyv1alpha1.SpaceTypeMailbox)
		return ok
	})
	translator, err := placement.New(clients, defs, resources)
	if err != nil {
		return nil, err
	}
	w := &Workloads{Translator: translator}
	if local.Writer != nil {
		w.Translator.WriteInProcess(local.Writer)
	}
	if w.Status, err = status.New(clients, resources, defs); err != nil {
		return nil, err
	}
	w.Scheduler, w.Mailbox, w.Upsync = scheduler.New(clients), mailbox.New(clients), upsync.New(clients, defs)
	w.startCaches = func(ctx context.Context) {
		go mailboxes.RunWithContext(ctx)
		go func() {
			if crossspace.WaitForSync(ctx, mailboxes) {
				resources.Start(ctx)
			}
		}()
		if local.CRDs == nil {
			crds.Start(ctx.Done())
		}
	}
	return w, nil
}

// StartCaches starts the caches the controllers share, until ctx ends.
// Call it once every controller is made and before any runs.
func (w *Workloads) StartCaches(ctx context.Context) {
	w.startCaches(ctx)
	klog.FromContext(ctx).V(2).Info("started the workload-management controllers' caches")
}

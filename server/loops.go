// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers"
	"github.com/kubestellar/kubestellar/controllers/syncerconnected"
	"github.com/kubestellar/kubestellar/server/quota"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/crdcontroller"
	"github.com/kubestellar/kubestellar/spaces/namespacecontroller"
	"github.com/kubestellar/kubestellar/spaces/namespacedefaults"
	"github.com/kubestellar/kubestellar/spaces/spacecontroller"
	"github.com/kubestellar/kubestellar/spaces/storageversionmigrator"
	"github.com/kubestellar/kubestellar/tunnel"
)

// loops is every control loop the server runs: this table is the answer to
// "what runs in the server". The caches the request path reads (Spaces,
// CRDs, syncer tokens, SyncerConfigs, RBAC) are not loops: they start
// before the server says it is ready (server.go, the kubestellar-spaces
// hook), and the loops after them.
var loops = []loop{
	// Spaces: their lifecycle, and what lives in them.
	{name: "space", leader: true, workers: 2, new: newSpaceLoop},
	{name: "namespace", leader: true, workers: 2, new: newNamespaceLoop},
	{name: "namespace-defaults", leader: true, workers: 2, new: newNamespaceDefaultsLoop},
	{name: "crd-instances", leader: true, workers: 1, new: newCRDInstancesLoop},
	// With --crds-per-space (else it does nothing): the status of CRDs.
	{name: "crd-status", leader: true, workers: 2, new: newCRDStatusLoop},
	// Each server collects the garbage of the deletes it commits.
	{name: "garbage-collector", workers: 2, new: func(s *Server, d *loopDeps) (runner, error) {
		return runFunc(func(ctx context.Context, workers int) { s.cfg.garbage.Run(ctx, workers, d.clients) }), nil
	}},
	// The leader looks for what a server left uncollected when it stopped.
	{name: "garbage-sweep", leader: true, workers: 1, new: func(s *Server, d *loopDeps) (runner, error) {
		return runFunc(func(ctx context.Context, _ int) { s.cfg.garbage.Sweep(ctx, garbageSweepEvery, d.clients) }), nil
	}},
	// Each space's StorageVersionMigrations.
	{name: "storage-version-migrator", leader: true, workers: 1, new: func(_ *Server, d *loopDeps) (runner, error) {
		return storageversionmigrator.New(d.clients)
	}},
	// What each tenant space stores, against its limits, on its Space.
	{name: "space-usage", leader: true, workers: 1, new: newSpaceUsageLoop},
	// Workload management, made together around the caches they share
	// (controllers.New).
	{name: "scheduler", leader: true, workers: 2, new: func(_ *Server, d *loopDeps) (runner, error) { return d.workloads.Scheduler, nil }},
	{name: "mailbox", leader: true, workers: 2, new: func(_ *Server, d *loopDeps) (runner, error) { return d.workloads.Mailbox, nil }},
	{name: "placement-translator", leader: true, workers: 4, new: func(_ *Server, d *loopDeps) (runner, error) { return d.workloads.Translator, nil }},
	{name: "status-summarizer", leader: true, workers: 2, new: func(_ *Server, d *loopDeps) (runner, error) { return d.workloads.Status, nil }},
	{name: "upsync", leader: true, workers: 2, new: func(_ *Server, d *loopDeps) (runner, error) { return d.workloads.Upsync, nil }},
	// The tunnels this server holds: each server writes its own
	// SyncTargets' SyncerConnected.
	{name: syncerconnected.Name, workers: 8, new: func(s *Server, d *loopDeps) (runner, error) {
		return runFunc(func(ctx context.Context, workers int) {
			// Time for syncers to come back before a tunnel said open here
			// but not open now is said closed.
			s.cfg.syncerConnected.Run(ctx, workers, d.clients, s.tunnels.Held, 2*tunnel.DeadAfter)
		}), nil
	}},
	// Several servers on one datastore: each says it is alive, and the
	// leader says which dead server's tunnels are gone.
	{name: "server-lease", several: true, workers: 1, new: func(s *Server, d *loopDeps) (runner, error) {
		return runFunc(func(ctx context.Context, _ int) {
			syncerconnected.KeepServerLease(ctx, d.rootKube, s.cfg.Options.SelfURL())
		}), nil
	}},
	{name: "dead-server-sweep", leader: true, several: true, workers: 1, new: func(s *Server, d *loopDeps) (runner, error) {
		return runFunc(func(ctx context.Context, _ int) {
			syncerconnected.SweepDeadServers(ctx, d.clients, d.rootKube, s.cfg.Options.SelfURL())
		}), nil
	}},
}

// loop is one control loop of the server.
type loop struct {
	name string
	// leader: only the server that holds the controllers' Lease runs it
	// (on SQLite, the only server), made anew for each term it leads, so
	// that a server that loses the lead and wins it back starts clean.
	// Otherwise every server runs it, from start to shutdown.
	leader bool
	// several: it runs only when several servers share a datastore
	// (--datastore-endpoint).
	several bool
	// workers is how many of its items the loop works on at once.
	workers int
	// new makes the loop; every loop of a term is made before any runs.
	new func(s *Server, d *loopDeps) (runner, error)
}

// runner runs a control loop until ctx ends.
type runner interface {
	Run(ctx context.Context, workers int)
}

// runFunc is a runner of a function.
type runFunc func(ctx context.Context, workers int)

func (f runFunc) Run(ctx context.Context, workers int) { f(ctx, workers) }

// loopDeps are what the loops are made of: clients with the server's
// loopback identity and the caches the request path shares with them.
type loopDeps struct {
	loopback      *rest.Config
	clients       *spaceClients
	root          dynamic.Interface
	rootKube      kubernetes.Interface
	ext           apiextensionsclient.Interface
	spaceInformer cache.SharedIndexInformer
	crdInformer   cache.SharedIndexInformer
	// spaceCRDs are every space's CRDs, with --crds-per-space.
	spaceCRDs *spaceCRDCache
	purger    *spaces.Purger
	// workloads are the workload-management controllers of this term;
	// set by startLoops for the leader's.
	workloads *controllers.Workloads
}

// startLoops makes the loops the table gives this server, those of the
// leader or the others, then runs each until ctx ends.
func (s *Server) startLoops(ctx context.Context, leader bool, deps *loopDeps) error {
	several := s.cfg.Options.DatastoreEndpoint != ""
	d := *deps
	if leader {
		local := controllers.InProcess{Writer: s.cfg.copies, Reader: s.cfg.copies}
		if d.spaceCRDs != nil {
			// Every space's CRDs, from the server's cache, for this term.
			term := d.spaceCRDs.forTerm()
			local.CRDs = controllerDefinitions{term}
			go func() {
				<-ctx.Done()
				term.RemoveAll()
			}()
		}
		w, err := controllers.New(d.loopback, local)
		if err != nil {
			return fmt.Errorf("making the workload-management controllers: %w", err)
		}
		d.workloads = w
	}
	type made struct {
		loop
		runner
	}
	var term []made
	var names []string
	for _, l := range selectLoops(loops, leader, several) {
		r, err := l.new(s, &d)
		if err != nil {
			return fmt.Errorf("making control loop %s: %w", l.name, err)
		}
		term = append(term, made{l, r})
		names = append(names, l.name)
	}
	if d.workloads != nil {
		d.workloads.StartCaches(ctx)
	}
	for _, m := range term {
		go m.Run(ctx, m.workers)
	}
	klog.FromContext(ctx).V(2).Info("started control loops", "leader", leader, "loops", names)
	return nil
}

// selectLoops returns the loops of table that run on a server: the
// leader's or every server's, with several servers on one datastore or
// one alone.
func selectLoops(table []loop, leader, several bool) []loop {
	var out []loop
	for _, l := range table {
		if l.leader == leader && (several || !l.several) {
			out = append(out, l)
		}
	}
	return out
}

func newSpaceLoop(_ *Server, d *loopDeps) (runner, error) {
	purgeSpace := func(ctx context.Context, space string) (int, error) {
		if err := unbindCRDs(ctx, d.clients, d.ext.ApiextensionsV1().CustomResourceDefinitions(), space); err != nil {
			return 0, err
		}
		return d.purger.PurgeSpace(ctx, space)
	}
	return spacecontroller.New(d.spaceInformer, d.root, d.clients.Kube, purgeSpace)
}

func newNamespaceLoop(_ *Server, d *loopDeps) (runner, error) {
	wildcard, err := d.clients.Kube(spaces.Wildcard)
	if err != nil {
		return nil, err
	}
	return namespacecontroller.New(wildcard, d.clients), nil
}

func newNamespaceDefaultsLoop(s *Server, d *loopDeps) (runner, error) {
	wildcard, err := d.clients.Kube(spaces.Wildcard)
	if err != nil {
		return nil, err
	}
	return namespacedefaults.New(wildcard, d.clients.Kube, namespacedefaults.Server{CA: s.cfg.CA.PEM, Address: s.cfg.Options.AdvertiseAddress, Port: s.cfg.Options.Port}), nil
}

func newCRDInstancesLoop(_ *Server, d *loopDeps) (runner, error) {
	newController := crdcontroller.New
	if d.spaceCRDs != nil {
		newController = func(informer cache.SharedIndexInformer, purger crdcontroller.Purger) (*crdcontroller.Controller, error) {
			return crdcontroller.NewEverywhere(informer, purger, func(space, name string) bool {
				_, ok, _ := d.spaceCRDs.indexer.GetByKey(spaces.Key(space, "", name))
				return ok && space != spaces.Root
			})
		}
	}
	c, err := newController(d.crdInformer, d.purger)
	if err != nil {
		return nil, err
	}
	return runFunc(func(ctx context.Context, _ int) { c.Run(ctx) }), nil
}

// newCRDStatusLoop keeps the status of the CRDs of every space but root
// (whose CRDs the apiextensions server's controllers keep), with
// --crds-per-space: names judged within the space, Established once
// served, deletion.
func newCRDStatusLoop(s *Server, d *loopDeps) (runner, error) {
	if d.spaceCRDs == nil {
		return runFunc(func(context.Context, int) {}), nil
	}
	var clients sync.Map // by space
	crds := func(space string) (apiextensionsv1client.CustomResourceDefinitionInterface, error) {
		if c, ok := clients.Load(space); ok {
			return c.(apiextensionsv1client.CustomResourceDefinitionInterface), nil
		}
		c, err := apiextensionsclient.NewForConfig(d.clients.config(space))
		if err != nil {
			return nil, err
		}
		crds := c.ApiextensionsV1().CustomResourceDefinitions()
		clients.Store(space, crds)
		return crds, nil
	}
	everywhere := func() []*apiextensionsv1.CustomResourceDefinition {
		crds, _ := s.cfg.crds.servedBy(allSpaces, false)
		return crds
	}
	var prepare func(*apiextensionsv1.CustomResourceDefinition) error
	if h := s.cfg.customResources; h != nil {
		prepare = h.Prepare
	}
	term := d.spaceCRDs.forTerm()
	c, err := crdcontroller.NewStatus(term, crds, d.purger, everywhere, prepare)
	if err != nil {
		term.RemoveAll()
		return nil, err
	}
	return runFunc(func(ctx context.Context, workers int) {
		defer term.RemoveAll()
		c.Run(ctx, workers)
	}), nil
}

// garbageSweepEvery is how often the leader sweeps every space for
// garbage left uncollected (and when it starts to lead).
const garbageSweepEvery = 30 * time.Minute

// spaceUsageEvery is how often the Spaces' usage is brought up to date.
const spaceUsageEvery = 10 * time.Second

func newSpaceUsageLoop(s *Server, d *loopDeps) (runner, error) {
	q := s.cfg.quotas
	return &quota.StatusWriter{Spaces: cache.NewGenericLister(d.spaceInformer.GetIndexer(), tenancyv1alpha1.SpacesGVR.GroupResource()),
		Client: d.root.Resource(tenancyv1alpha1.SpacesGVR), Usage: q.statusUsage, Limits: q.limits.For, Governed: q.governed, Every: spaceUsageEvery}, nil
}

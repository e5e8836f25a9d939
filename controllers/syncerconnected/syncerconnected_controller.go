// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncerconnected

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// Name is the controller's name, in its queue's metrics and its logs.
const Name = "syncer-connected"

// Clients reach a space as the server.
type Clients interface {
	Dynamic(space string) (dynamic.Interface, error)
}

// key is a SyncTarget: its inventory space and name.
type key struct{ inv, st string }

func (k key) String() string { return k.inv + "/" + k.st }

// Controller writes the SyncerConnected condition of the SyncTargets whose
// tunnels this server holds or held.
type Controller struct {
	// self is this server's advertised URL, recorded as the SyncTarget's
	// tunnelServer while the tunnel is open here.
	self string
	// started is when this server started: a SyncTarget said connected
	// here since before then lost its tunnel when the last one stopped,
	// however it stopped.
	started time.Time
	// cached returns a SyncTarget from the server's cache, to write its
	// condition without reading it first (nil: always read).
	cached func(inv, st string) (*unstructured.Unstructured, bool)
	queue  workqueue.TypedRateLimitingInterface[key]

	mu sync.Mutex
	// pending are the SyncTargets changed and not yet written: a stopping
	// server writes them closed.
	pending map[key]bool
	// clients and connected are set by Run; logger with them.
	clients   Clients
	connected func(inv, st string) bool
	logger    klog.Logger
	// swept is set once the start-up sweep has run: from then on a record
	// said open here without a tunnel is corrected as soon as it is seen.
	swept atomic.Bool
	// closing is set by Closing: the server is stopping, and every tunnel
	// it holds is recorded closed, as the tunnel server's count may not
	// say yet.
	closing atomic.Bool
}

// maxRetryDelay bounds the wait before a failed write is tried again.
const maxRetryDelay = 10 * time.Second

// New makes the controller of a server whose advertised URL is self.
// cached, when not nil, returns the server's cached copy of a SyncTarget.
// Changes heard before Run wait in the queue until it runs.
func New(self string, cached func(inv, st string) (*unstructured.Unstructured, bool)) *Controller {
	return &Controller{
		self: self, started: time.Now(), cached: cached, pending: map[key]bool{},
		// A failed write is retried within seconds, never later than
		// maxRetryDelay: a SyncTarget shown in the wrong state misleads
		// whoever looks at it.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[key](100*time.Millisecond, maxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: Name}),
	}
}

// Changed is the tunnel server's onChange: a SyncTarget's first tunnel
// opened, or its last one closed. What is written is what the tunnel
// server says when a worker gets to it.
func (c *Controller) Changed(_ context.Context, inventorySpace, syncTarget string, _ bool) {
	k := key{inventorySpace, syncTarget}
	c.mu.Lock()
	c.pending[k] = true
	c.mu.Unlock()
	c.queue.Add(k)
}

// Run writes the conditions with workers at once until ctx ends; connected
// says whether a SyncTarget has a tunnel to this server now, as Changed
// heard it (the tunnel server's Held: counted open, not only once it
// carries requests). sweepAfter
// after it starts (time for syncers to come back), SyncTargets still said
// connected to this server from before, but without a tunnel now, are said
// not to be. (Tunnels said held by other servers are theirs; the leader
// looks after those of servers that died.)
func (c *Controller) Run(ctx context.Context, workers int, clients Clients, connected func(inv, st string) bool, sweepAfter time.Duration) {
	c.mu.Lock()
	c.clients, c.connected, c.logger = clients, connected, klog.FromContext(ctx).WithValues("controller", Name)
	c.mu.Unlock()
	sweep := time.AfterFunc(sweepAfter, func() {
		if err := c.sweep(ctx, clients, connected); err != nil && ctx.Err() == nil {
			c.logger.Error(err, "cannot check which SyncTargets lost their tunnel while the server was down")
		}
		c.swept.Store(true)
	})
	defer sweep.Stop()
	loop := worker.Loop[key]{Name: Name, Queue: c.queue, Failure: "cannot record the tunnel on the SyncTarget; will retry",
		Process: func(ctx context.Context, k key) (bool, error) {
			c.mu.Lock()
			delete(c.pending, k)
			c.mu.Unlock()
			err := writeCondition(ctx, clients, c.cached, c.self, c.started, k.inv, k.st, c.holds(k.inv, k.st))
			if err != nil {
				c.mu.Lock()
				c.pending[k] = true
				c.mu.Unlock()
			}
			return false, err
		}}
	// The workers are waited for: one that took a key as ctx ended fails
	// its write and puts the key back in pending, which Closing, called
	// next as the server stops, must see.
	var wg sync.WaitGroup
	loop.Run(ctx, 0, func(ctx context.Context) {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				loop.Work(ctx)
			}()
		}
	})
	wg.Wait() // Run shut the queue down: each worker ends after its key
}

// holds says whether a SyncTarget's tunnel is to be recorded open here:
// held, and the server not stopping.
func (c *Controller) holds(inv, st string) bool {
	return !c.closing.Load() && c.connected(inv, st)
}

// sweep queues the SyncTargets that say SyncerConnected=True, with their
// tunnel on this server (or on no server named), but have no tunnel to it.
func (c *Controller) sweep(ctx context.Context, clients Clients, connected func(inv, st string) bool) error {
	targets, err := connectedSyncTargets(ctx, clients)
	if err != nil {
		return err
	}
	for _, st := range targets {
		if holder := st.Status.TunnelServer; (holder == "" || holder == c.self) && !connected(st.inv, st.Name) {
			c.Changed(ctx, st.inv, st.Name, false)
		}
	}
	return nil
}

// SyncTargetHandler hears the server's cache of SyncTargets, so that what
// they record follows the tunnels held here, whoever wrote it last: a
// SyncTarget whose tunnel is held here but is recorded closed (or on no
// server) is queued, and so is one recorded open here without a tunnel
// here, once the start-up sweep has run (before, its syncer may be on its
// way back). A record that another server holds the tunnel is left alone:
// that server says so because it holds one too, and it records the close
// when its tunnel drops, if ever. What is written is still what the tunnel
// server says when a worker gets to it, and a record that agrees queues
// nothing, so a heartbeat costs one lookup.
//
// Without it, a record written over the server's would stand until the
// tunnel next changed: the leader's sweep of dead servers judges a server
// by its Lease, and a server too busy to renew it in time is alive and
// holding its tunnels.
func (c *Controller) SyncTargetHandler() cache.ResourceEventHandler {
	observe := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		c.mu.Lock()
		running := c.connected != nil
		c.mu.Unlock()
		if !running {
			return // before Run: the tunnels' changes are queued
		}
		k, err := spaces.KeyFunc(u)
		if err != nil {
			return
		}
		inv, _, name, err := spaces.SplitKey(k)
		if err != nil {
			return
		}
		open, server := recorded(u)
		held := c.holds(inv, name)
		switch {
		case held && (!open || server == ""),
			!held && open && server == c.self && c.swept.Load():
			c.queue.Add(key{inv, name})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj) },
		UpdateFunc: func(_, obj any) { observe(obj) },
	}
}

// recorded reads what a SyncTarget records of its tunnel: whether
// SyncerConnected is True, and the tunnel server.
func recorded(u *unstructured.Unstructured) (open bool, server string) {
	server, _, _ = unstructured.NestedString(u.Object, "status", "tunnelServer")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == edgev2alpha1.SyncTargetSyncerConnected {
			return m["status"] == string(metav1.ConditionTrue), server
		}
	}
	return false, server
}

// closingWriters is how many closings a stopping server writes at once.
const closingWriters = 16

// closingBudget is how long a stopping server spends recording its
// tunnels closed. Each is a write; a server holding a thousand tunnels
// would spend seconds of its stop on them, and every syncer waits for the
// restarted server meanwhile. Those not written in time are recorded when
// their syncer comes back (TunnelReopened: cut when the server last
// stopped) or, for a syncer that does not, by the sweep of the server's
// next start (or the leader's sweep of dead servers).
const closingBudget = 500 * time.Millisecond

// Closing records, while the server still serves, that the tunnels open
// now (keys "inventory/synctarget") are closing with it, and so are those
// whose opening or closing is not written yet: closingWriters at once, for
// closingBudget at most. Before Run it has nothing to write with, and
// writes nothing.
func (c *Controller) Closing(open []string) error {
	c.closing.Store(true)
	c.mu.Lock()
	clients, logger := c.clients, c.logger
	keys := map[key]bool{}
	for k := range c.pending {
		keys[k] = true
	}
	c.mu.Unlock()
	for _, o := range open {
		inv, st, _ := strings.Cut(o, "/")
		keys[key{inv, st}] = true
	}
	if clients == nil || len(keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closingBudget)
	defer cancel()
	var (
		mu      sync.Mutex
		errs    []error
		written atomic.Int64
		g       errgroup.Group
	)
	g.SetLimit(closingWriters)
	for k := range keys {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			err := writeCondition(ctx, clients, c.cached, c.self, time.Time{}, k.inv, k.st, false)
			switch {
			case err == nil:
				written.Add(1)
			case ctx.Err() == nil: // out of time: counted below
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if left := int64(len(keys)) - written.Load() - int64(len(errs)); left > 0 {
		logger.Info("recorded tunnels closed as the server stops; the rest are recorded when their syncer comes back",
			"written", written.Load(), "left", left, "budget", closingBudget)
	}
	return errors.Join(errs...)
}

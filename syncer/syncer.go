// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/datadir"
	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/internal/windows"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/tunnel"
)

var syncerConfigsGVR = edgev2alpha1.SchemeGroupVersion.WithResource("syncerconfigs")

// Syncer keeps one edge cluster in step with its mailbox.
type Syncer struct {
	opts *Options
	out  io.Writer
	tok  jointoken.Token

	edge       dynamic.Interface
	edgeCfg    *rest.Config
	edgeMapper meta.ResettableRESTMapper
	ca         []byte // the server's CA, once connected
	servers    *servers

	// Set once connected.
	id        Identity
	owner     string
	mailbox   dynamic.Interface
	inventory dynamic.Interface
	// mailboxCaches lists and watches the mailbox for the caches: a watch
	// lasts until the server ends it, not the 30 s a request may take.
	mailboxCaches dynamic.Interface
	// apiTransport is the transport of every API client of the syncer
	// (one HTTP/2 connection), which the tunnel shares where it can.
	apiTransport http.RoundTripper
	// inventoryCaches watches the SyncTarget for its cache, self.
	inventoryCaches dynamic.Interface
	connected       atomic.Bool
	// tunnelOpen: the tunnel is open, which shows the center the syncer is
	// alive; lastStatusWrite is when the heartbeat last wrote the status
	// and lastReport what it wrote of the syncer's own (syncerReport)
	// (heartbeat.go; read and written by the heartbeat only); wroteAt is
	// lastStatusWrite in Unix nanoseconds, for the cache of the SyncTarget.
	tunnelOpen      atomic.Bool
	lastStatusWrite time.Time
	wroteAt         atomic.Int64
	lastReport      lastReport
	// lastRead is the SyncTarget the heartbeat last read, and host the
	// name of the host it reports (the heartbeat's alone, as above).
	lastRead  lastRead
	host      string
	announced bool // readiness was announced
	health    *health
	// mayI asks the edge what the syncer may do (permissions.go).
	mayI accessCheck
	// inCluster: the syncer runs in a pod of its edge cluster, named
	// podNamespace/podName, whose image podImage holds once read (where.go).
	inCluster             bool
	podName, podNamespace string
	podImage              atomic.Pointer[string]

	downQ   workqueue.TypedRateLimitingInterface[objKey]
	reportQ workqueue.TypedRateLimitingInterface[objKey]
	upQ     workqueue.TypedRateLimitingInterface[schema.GroupVersionResource]
	// rolloutQ holds one key, rolloutsKey: the rollout reports are
	// computed together (rollouts.go).
	rolloutQ workqueue.TypedRateLimitingInterface[string]
	// rolloutsWaiting is when (UnixNano) the rollout reports began to
	// wait to be written (holdProgress); 0: they do not.
	rolloutsWaiting atomic.Int64
	// clock tells the time to holdProgress (nil: the real one).
	clock clock.PassiveClock
	// reportsInConfig: the center keeps no rollout reports in the
	// SyncTarget's status (a server before them drops the fields), so
	// they go in the SyncerConfig's, with a write of their own.
	reportsInConfig atomic.Bool

	mu       sync.Mutex
	desired  map[objKey]*desired
	live     bool            // the mailbox has been read: removals may be carried out
	deferred map[objKey]bool // removals waiting for the mailbox to be read
	dirty    bool            // desired changed since it was saved (markDirtyLocked)
	// saveSoon wakes the save loop when desired changes.
	saveSoon chan struct{}
	inStep   map[objKey]bool
	problems map[objKey]problem
	// handover are the objects of a resource the SyncerConfig now wants in
	// another version (its CRD serves a new one, say): no longer desired
	// under their old key, but not removed from the edge before the new
	// version's copies have been read, as they most likely hold the same
	// objects (awaitHandover).
	handover map[objKey]bool
	// awaiting are the objects whose apply found their namespace missing
	// at the edge, by namespace: applied again as soon as it is there.
	awaiting map[string]map[objKey]bool
	applied  map[objKey]*applied // what the syncer last applied of each edge object, in this run (drift.go)
	drift    driftTally          // reverts the SyncTarget's status has yet to count
	// statusNow asks the heartbeat to write the SyncTarget's status soon.
	statusNow chan struct{}
	// rollouts are the rollout reports the heartbeat writes in the
	// SyncTarget's status (unset: none computed yet in this run, and the
	// status keeps those it holds); reported, those it last wrote there.
	rollouts, reported heartbeatReports
	// hold is the hold read from the data directory (hold.go), nil for
	// none; holdOn is whether it held when last read; heldBack are the
	// objects with a change it held back.
	hold     *Hold
	holdOn   bool
	heldBack map[objKey]bool
	// windows are the SyncTarget's update windows (windows.go), as last
	// read; windowClosed is whether the edge was outside them when last
	// settled; windowsChanged wakes the hold's watch when they change.
	windows        windows.Schedule
	windowSpec     []edgev2alpha1.UpdateWindow
	windowClosed   bool
	windowsChanged chan struct{}
	config         *edgev2alpha1.SyncerConfig
	// Mailbox caches: copies per resource, the CRDs, upsynced objects.
	copies    map[schema.GroupVersionResource]*running
	crds      *running
	configInf *running
	// self caches the syncer's own SyncTarget, which the heartbeat reads.
	self       *running
	upsynced   map[schema.GroupVersionResource]*running
	upsyncGVRs map[schema.GroupVersionResource]bool
	// Edge caches per resource, and the descendants of workloads.
	edgeObjs    map[schema.GroupVersionResource]*running
	pods, rsets *running
	workloadUID map[string]objKey // UID of an owned edge workload -> its key

	// Namespaces and CRDs on their way out of the edge (namespaces.go):
	// when each left the mailbox, and how to read what they hold.
	removing     map[objKey]time.Time
	contents     edgeContents
	now          func() time.Time
	removalGrace time.Duration
	keptRecheck  time.Duration
}

// running is an informer with its own stop channel.
type running struct {
	informer cache.SharedIndexInformer
	synced   func() bool
	stop     chan struct{}
}

func (r *running) store() cache.Store { return r.informer.GetStore() }

func (r *running) get(namespace, name string) *unstructured.Unstructured {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, _ := r.informer.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// problem is why an object is not in step at the edge.
type problem struct {
	Reason, Message string
}

// Run runs the syncer until ctx is done.
func Run(ctx context.Context, o *Options, out io.Writer) error {
	tok, err := jointoken.Parse(o.Token)
	if err != nil {
		return fmt.Errorf("--token: %w", err)
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", o.DataDir, err)
	}
	lock, err := datadir.Acquire(o.DataDir, "syncer.lock", "kubestellar syncer")
	if err != nil {
		return err
	}
	defer lock.Release()
	edgeCfg, inCluster, err := edgeConfig(o, os.Getenv)
	if err != nil {
		return err
	}
	s, err := newSyncer(o, out, tok, edgeCfg)
	if err != nil {
		return err
	}
	s.inCluster, s.podName, s.podNamespace = inCluster, os.Getenv(PodNameEnv), os.Getenv(PodNamespaceEnv)
	if o.HealthAddress != "" {
		addr, err := serveHealth(ctx, o.HealthAddress, s.health)
		if err != nil {
			return err
		}
		klog.FromContext(ctx).Info("serving /livez and /readyz", "address", addr.String())
	}
	return s.run(ctx)
}

// edgeConfig finds the edge cluster as client-go does: --kubeconfig,
// $KUBECONFIG, ~/.kube/config, else the pod's service account when
// $KUBERNETES_SERVICE_HOST says it runs in one (inCluster), read from
// --service-account-dir rather than client-go's fixed path.
func edgeConfig(o *Options, getenv func(string) string) (cfg *rest.Config, inCluster bool, err error) {
	if o.EdgeConfig != nil {
		cfg = rest.CopyConfig(o.EdgeConfig)
		cfg.QPS, cfg.Burst = o.EdgeQPS, o.EdgeBurst
		cfg.UserAgent = FieldManager
		return cfg, false, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	inCluster = o.Kubeconfig == "" && getenv("KUBECONFIG") == "" && getenv("KUBERNETES_SERVICE_HOST") != "" && !fileExists(clientcmd.RecommendedHomeFile)
	if inCluster {
		cfg, err = inClusterConfig(o.ServiceAccountDir, getenv)
	} else {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
		switch {
		case err != nil && o.Kubeconfig == "":
			err = fmt.Errorf("no edge cluster to sync to: pass --kubeconfig (or set $KUBECONFIG), or run in a pod: %w", err)
		case err != nil:
			err = fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, err)
		}
	}
	if err != nil {
		return nil, false, err
	}
	cfg.QPS, cfg.Burst = o.EdgeQPS, o.EdgeBurst
	cfg.UserAgent = FieldManager
	return cfg, inCluster, nil
}

// inClusterConfig is the pod's own credentials: the API server from the
// environment the kubelet sets, the service account token (re-read as the
// kubelet rotates it) and CA from dir.
func inClusterConfig(dir string, getenv func(string) string) (*rest.Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if port == "" {
		return nil, fmt.Errorf("$KUBERNETES_SERVICE_HOST is set but $KUBERNETES_SERVICE_PORT is not: is this a pod?")
	}
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	for _, f := range []string{token, ca} {
		if !fileExists(f) {
			return nil, fmt.Errorf("--service-account-dir %s has no %s: mount the pod's service account token (automountServiceAccountToken) or pass --kubeconfig", dir, filepath.Base(f))
		}
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		TLSClientConfig: rest.TLSClientConfig{CAFile: ca},
		BearerTokenFile: token,
	}, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func newSyncer(o *Options, out io.Writer, tok jointoken.Token, edgeCfg *rest.Config) (*Syncer, error) {
	// The edge's API clients share one transport, one connection.
	hc, err := rest.HTTPClientFor(edgeCfg)
	if err != nil {
		return nil, fmt.Errorf("edge cluster: %w", err)
	}
	edge, err := dynamic.NewForConfigAndClient(edgeCfg, hc)
	if err != nil {
		return nil, fmt.Errorf("edge cluster: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(edgeCfg, hc)
	if err != nil {
		return nil, fmt.Errorf("edge cluster: %w", err)
	}
	md, err := metadata.NewForConfigAndClient(edgeCfg, hc)
	if err != nil {
		return nil, fmt.Errorf("edge cluster: %w", err)
	}
	mayI, err := selfAccessCheck(edgeCfg, hc)
	if err != nil {
		return nil, fmt.Errorf("edge cluster: %w", err)
	}
	limiter := func() workqueue.TypedRateLimiter[objKey] {
		return workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[objKey](200*time.Millisecond, 30*time.Second),
			&workqueue.TypedBucketRateLimiter[objKey]{Limiter: newLimiter()})
	}
	// The queues are unnamed: the syncer serves no metrics, and a named
	// queue keeps a goroutine that updates its metrics twice a second,
	// four per edge for nothing (a simulator's 10,000 edges' 80,000
	// wake-ups a second).
	return &Syncer{
		opts: o, out: out, tok: tok, edge: edge, edgeCfg: edgeCfg,
		edgeMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		downQ:      workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[objKey]{}),
		reportQ:    workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[objKey]{}),
		upQ: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[schema.GroupVersionResource](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[schema.GroupVersionResource]{}),
		rolloutQ: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{}),
		desired: map[objKey]*desired{}, deferred: map[objKey]bool{}, handover: map[objKey]bool{}, inStep: map[objKey]bool{}, problems: map[objKey]problem{}, awaiting: map[string]map[objKey]bool{},
		applied: map[objKey]*applied{}, statusNow: make(chan struct{}, 1), heldBack: map[objKey]bool{},
		windowsChanged: make(chan struct{}, 1), saveSoon: make(chan struct{}, 1),
		copies: map[schema.GroupVersionResource]*running{}, upsynced: map[schema.GroupVersionResource]*running{},
		upsyncGVRs: map[schema.GroupVersionResource]bool{}, edgeObjs: map[schema.GroupVersionResource]*running{},
		workloadUID: map[string]objKey{},
		removing:    map[objKey]time.Time{}, contents: newEdgeContents(disc, md), now: time.Now,
		removalGrace: removalGrace, keptRecheck: keptRecheck, health: &health{}, mayI: mayI,
	}, nil
}

// newLimiter bounds the overall rate of retries.
func newLimiter() *rate.Limiter { return rate.NewLimiter(rate.Limit(50), 300) }

// ready says the syncer keeps the edge, once.
func (s *Syncer) ready(status string) {
	if s.announced {
		return
	}
	s.announced = true
	s.health.setReady(status)
	if s.opts.OnReady != nil {
		s.opts.OnReady(status)
	}
}

func (s *Syncer) progress(format string, args ...any) {
	fmt.Fprintf(s.out, format+"\n", args...)
}

func (s *Syncer) run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("syncTarget", s.opts.SyncTarget)
	ctx = klog.NewContext(ctx, logger)
	var err error
	if s.servers, err = newServers(s.opts.Servers(), logger); err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	defer utilruntime.HandleCrash()
	defer s.stopInformers()

	// The saved state keeps the edge as it was told while the center cannot
	// be reached. It is applied only where the edge differs from it; nothing
	// is removed until the mailbox has been read.
	saved, err := loadState(s.opts.DataDir)
	if err != nil {
		return err
	}
	// A hold made while the syncer was stopped, and the last update windows
	// it read, hold from its first write.
	s.loadWindows(ctx)
	s.loadHold(ctx)
	if saved != nil && saved.SyncTarget == s.opts.SyncTarget {
		s.id = Identity{InventorySpace: saved.InventorySpace, SyncTarget: saved.SyncTarget, MailboxSpace: saved.MailboxSpace}
		s.owner = OwnerValue(saved.InventorySpace, saved.SyncTarget)
		objs := saved.desiredObjects()
		s.mu.Lock()
		for _, d := range objs {
			s.desired[d.Key] = d
		}
		s.mu.Unlock()
		for _, d := range objs {
			s.downQ.Add(d.Key)
		}
		s.progress("loaded the last desired state (%d objects) from %s", len(objs), s.opts.DataDir)
		s.ready(fmt.Sprintf("keeping the edge from the saved state (%d objects)", len(objs)))
	}
	var wg sync.WaitGroup
	defer func() {
		// Workers return once their queues shut down.
		s.downQ.ShutDown()
		s.reportQ.ShutDown()
		s.upQ.ShutDown()
		s.rolloutQ.ShutDown()
		wg.Wait()
	}()
	// Returning (on an error too) stops every goroutine before the wait above.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := func(n int, f func()) {
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); f() }()
		}
	}
	// The loops' names label their panics (worker.Loop).
	down := worker.Loop[objKey]{Name: "downsync", Queue: s.downQ, Process: s.reconcileDownsync, Failure: "downsync failed", Quiet: isExpected}
	report := worker.Loop[objKey]{Name: "report", Queue: s.reportQ, Process: s.reconcileReport, Failure: "reporting to the mailbox failed", Quiet: isExpected}
	upsync := worker.Loop[schema.GroupVersionResource]{Name: "upsync", Queue: s.upQ, Process: s.reconcileUpsync, Failure: "upsync failed", Quiet: isExpected}
	rollouts := worker.Loop[string]{Name: "rollouts", Queue: s.rolloutQ, Process: s.reconcileRollouts, Failure: "reporting rollouts to the mailbox failed", Quiet: isExpected}
	startDown := func() { start(s.opts.Workers, func() { down.Work(ctx) }) }
	if saved != nil {
		startDown()
	}
	start(1, func() { s.saveLoop(ctx) })
	start(1, func() { s.watchHold(ctx) })

	if err := s.connect(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if saved == nil {
		startDown()
	}
	s.ready("connected; mailbox " + s.id.MailboxSpace)
	// The caches first: the first heartbeat reads the SyncTarget from
	// its cache rather than from the server.
	s.startMailbox(ctx)
	start(s.opts.Workers, func() { report.Work(ctx) })
	start(1, func() { upsync.Work(ctx) })
	start(1, func() { rollouts.Work(ctx) })
	start(1, func() { s.heartbeatLoop(ctx) })
	if err := s.startTunnel(ctx, start); err != nil {
		return err
	}
	start(1, func() { s.awaitFirstSync(ctx) })
	<-ctx.Done()
	s.progress("stopping")
	return nil
}

// isExpected are errors retried without logging: another writer was first,
// or the center is unreachable (reported once by the heartbeat).
func isExpected(err error) bool {
	return worker.Conflicts(err) || errors.Is(err, errOffline) || errors.Is(err, errRetry) || errors.Is(err, errMissingPermission)
}

var (
	errOffline = errors.New("the center is unreachable")
	errRetry   = errors.New("not yet")
	// errMissingPermission is an edge request the syncer's credentials do
	// not allow: reported on the object, retried quietly.
	errMissingPermission = errors.New("missing permission at the edge")
)

// connect finds the server's CA, learns the token's SyncTarget and its
// mailbox, retrying with backoff and jitter until it succeeds or an error
// says retrying is pointless.
func (s *Syncer) connect(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 30 * time.Second}
	var base *rest.Config
	var client *http.Client
	var id Identity
	reported := ""
	for {
		err := func() error {
			i := s.servers.current.Load()
			var err error
			// The CA, once read and checked against the token, and the
			// client, once made, serve every later attempt: a fleet
			// connecting at once (a server busy with thousands of syncers
			// answers 429 or times out) would otherwise pay the server two
			// TLS handshakes per attempt, each one more load on the server
			// it waits for.
			if client == nil {
				var ca []byte
				if ca, err = serverCA(ctx, s.opts, s.servers.URL(), s.tok); err == nil {
					s.ca = ca
					base = baseConfig(s.opts, s.tok, ca, s.servers)
					if client, err = rest.HTTPClientFor(base); err != nil {
						return errPermanent{err}
					}
				}
			}
			if err == nil {
				id, err = identify(ctx, client, base, s.opts.SyncTarget)
			}
			if err != nil {
				if !IsPermanent(err) {
					s.servers.failed(i, err)
				}
				return err
			}
			if id.MailboxSpace == "" {
				return fmt.Errorf("SyncTarget %s/%s has no mailbox yet", id.InventorySpace, id.SyncTarget)
			}
			return nil
		}()
		if err == nil {
			break
		}
		if IsPermanent(err) {
			return err
		}
		if msg := err.Error(); msg != reported {
			s.progress("waiting for the center: %v (retrying)", err)
			logger.Info("cannot reach the center yet", "err", err)
			reported = msg
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff.Step()):
		}
	}
	s.mu.Lock()
	s.id = id
	s.owner = OwnerValue(id.InventorySpace, id.SyncTarget)
	s.mu.Unlock()
	// Every API client of the syncer shares one transport, and so one
	// HTTP/2 connection to the center, which multiplexes the requests and
	// the caches' watches: a server of 10,000 edges holds 10,000 of them
	// (and the tunnels), not four times as many. The caches' client goes
	// without the request timeout (watchConfig says why).
	watches := &http.Client{Transport: client.Transport}
	s.apiTransport = client.Transport
	var err error
	if s.mailbox, err = dynamic.NewForConfigAndClient(spaceConfig(base, id.MailboxSpace), client); err != nil {
		return err
	}
	caches, err := dynamic.NewForConfigAndClient(watchConfig(spaceConfig(base, id.MailboxSpace)), watches)
	if err != nil {
		return err
	}
	s.mailboxCaches = listThenWatch{caches}
	if s.inventory, err = dynamic.NewForConfigAndClient(spaceConfig(base, id.InventorySpace), client); err != nil {
		return err
	}
	inventoryCaches, err := dynamic.NewForConfigAndClient(watchConfig(spaceConfig(base, id.InventorySpace)), watches)
	if err != nil {
		return err
	}
	s.inventoryCaches = listThenWatch{inventoryCaches}
	s.connected.Store(true)
	s.progress("connected to %s as SyncTarget %s/%s", s.servers.URL(), id.InventorySpace, id.SyncTarget)
	s.progress("mailbox %s found", id.MailboxSpace)
	return nil
}

// startMailbox starts the caches of the mailbox's SyncerConfig (which
// starts the caches of the copies and, when it lists CRDs, of the CRDs),
// and of the SyncTarget.
func (s *Syncer) startMailbox(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.self = s.startSelf(ctx)
	s.configInf = s.startInformer(ctx, s.mailboxCaches, syncerConfigsGVR, nil, nil, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onConfig(ctx, obj) },
		UpdateFunc: func(_, obj any) { s.onConfig(ctx, obj) },
		DeleteFunc: func(any) { s.onConfig(ctx, nil) },
	})
}

// followCRDsLocked keeps a cache of the mailbox's CRDs while the config
// lists any, and none otherwise: most edges are placed no CRD, and a watch
// the server holds for each of them (with its goroutines and buffers, a
// third of what an idle edge costs the server) and a list of the
// server's own CRDs at every connect are then for nothing. s.mu is held.
func (s *Syncer) followCRDsLocked(ctx context.Context) {
	switch {
	case len(s.config.Spec.CRDs) > 0 && s.crds == nil:
		s.crds = startInformer(ctx, s.mailboxCaches, crdsGVR, nil, nil, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.onCRD() },
			UpdateFunc: func(_, _ any) { s.onCRD() },
			DeleteFunc: func(any) { s.onCRD() },
		}, withoutServerCRDs)
	case len(s.config.Spec.CRDs) == 0 && s.crds != nil:
		close(s.crds.stop)
		s.crds = nil
	}
}

// withoutServerCRDs keeps, of a CRD of the server's own groups, only its
// metadata: a mailbox serves ten of them, some 80 KB of JSON that every
// syncer would hold in its cache for nothing (a third of a simulated
// edge's memory).
func withoutServerCRDs(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	u.SetManagedFields(nil)
	if _, group, _ := strings.Cut(u.GetName(), "."); edgev2alpha1.ServerGroup(group) {
		stub := &unstructured.Unstructured{}
		stub.SetAPIVersion(u.GetAPIVersion())
		stub.SetKind(u.GetKind())
		stub.SetName(u.GetName())
		stub.SetUID(u.GetUID())
		stub.SetResourceVersion(u.GetResourceVersion())
		return stub, nil
	}
	return u, nil
}

// listThenWatch is a client whose informers list, then watch, without
// first asking for a streamed list (watch-list): the server does not serve
// those (server/config.go), and every cache of every syncer would
// otherwise ask once, be refused, and then list.
type listThenWatch struct{ dynamic.Interface }

// IsWatchListSemanticsUnSupported tells client-go's informers (see
// k8s.io/client-go/util/watchlist).
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// startInformer starts a cache of one resource, without managed fields;
// s.mu is held.
func (s *Syncer) startInformer(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource,
	tweak dynamicinformer.TweakListOptionsFunc, indexers cache.Indexers, handler cache.ResourceEventHandler) *running {
	return startInformer(ctx, client, gvr, tweak, indexers, handler, dropManagedFields)
}

// startInformer starts a cache of one resource whose objects go through
// transform.
func startInformer(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource,
	tweak dynamicinformer.TweakListOptionsFunc, indexers cache.Indexers, handler cache.ResourceEventHandler,
	transform cache.TransformFunc) *running {
	all := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for k, v := range indexers {
		all[k] = v
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(client, gvr, metav1.NamespaceAll, 0, all, longWatches(tweak)).Informer()
	_ = inf.SetTransform(transform)
	r := &running{informer: inf, synced: inf.HasSynced, stop: make(chan struct{})}
	if handler != nil {
		reg, err := inf.AddEventHandler(handler)
		if err == nil {
			r.synced = reg.HasSynced
		}
	}
	go inf.RunWithContext(wait.ContextForChannel(mergeDone(ctx, r.stop)))
	return r
}

// watchTimeoutFactor is how much longer than client-go asks the syncer's
// caches hold each watch. A reflector ends its watch after 5 to 10
// minutes and watches again, a request through the server's
// authentication, fairness and watch cache. A syncer at rest holds a
// watch of its SyncTarget and one of its SyncerConfig, and one more per
// resource placed in its mailbox: 1,000 edges had renewed 965 watches
// about 9.5 minutes after they connected, and 10,000 with one resource
// placed would renew about 70 a second. 30 to 60 minutes is what the API
// server gives a watch that names no timeout (--min-request-timeout); the
// tunnel's pings and the HTTP/2 connection's health check, not the
// watch's end, are what find a dead server.
const watchTimeoutFactor = 6

// longWatches is tweak, and a watch's timeout (client-go's reflector sets
// one on each watch, and none on a list) watchTimeoutFactor times as long.
func longWatches(tweak dynamicinformer.TweakListOptionsFunc) dynamicinformer.TweakListOptionsFunc {
	return func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
		if o.TimeoutSeconds != nil {
			t := *o.TimeoutSeconds * watchTimeoutFactor
			o.TimeoutSeconds = &t
		}
	}
}

// mergeDone closes when ctx is done or stop is closed.
func mergeDone(ctx context.Context, stop chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		close(done)
	}()
	return done
}

func (s *Syncer) stopInformers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, group := range []map[schema.GroupVersionResource]*running{s.copies, s.upsynced, s.edgeObjs} {
		for gvr, r := range group {
			close(r.stop)
			delete(group, gvr)
		}
	}
	for _, r := range []*running{s.crds, s.configInf, s.pods, s.rsets, s.self} {
		if r != nil {
			close(r.stop)
		}
	}
	s.crds, s.configInf, s.pods, s.rsets, s.self = nil, nil, nil, nil, nil
}

func copySelector(o *metav1.ListOptions) { o.LabelSelector = edgev2alpha1.PlacementCopyLabel + "=true" }

func upsyncedSelector(o *metav1.ListOptions) { o.LabelSelector = UpsyncedLabel + "=true" }

// onConfig follows the SyncerConfig: caches of the resources it names,
// the CRDs it lists, the upsync clauses.
func (s *Syncer) onConfig(ctx context.Context, obj any) {
	cfg := &edgev2alpha1.SyncerConfig{}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg); err != nil {
			klog.FromContext(ctx).Error(err, "cannot read the SyncerConfig")
			return
		}
		if u.GetName() != edgev2alpha1.SyncerConfigName {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = cfg
	want := map[schema.GroupVersionResource]bool{}
	for _, r := range cfg.Spec.Resources {
		want[schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}] = true
	}
	for gvr := range want {
		if _, ok := s.copies[gvr]; ok {
			continue
		}
		s.copies[gvr] = s.startInformer(ctx, s.mailboxCaches, gvr, copySelector, nil, s.copyHandler(gvr))
	}
	for gvr, r := range s.copies {
		if want[gvr] {
			continue
		}
		close(r.stop)
		delete(s.copies, gvr)
		// A resource the config now wants in another version (its CRD
		// serves a new one) most likely has the same objects in the new
		// version's copies, and an edge object is one and the same
		// whichever version names it: deleting it now, to make it again
		// under the new version, would restart what runs there for
		// nothing. Its objects are handed over instead, and removed only
		// if the new version's copies prove not to hold them.
		handOver := len(otherVersions(want, gvr)) > 0
		n := 0
		for k := range s.desired {
			if k.GVR != gvr {
				continue
			}
			if !handOver {
				s.removeDesiredLocked(k)
				continue
			}
			delete(s.desired, k)
			s.markDirtyLocked()
			s.handover[k] = true
			n++
		}
		if handOver {
			klog.FromContext(ctx).Info("the SyncerConfig wants another version of a resource: its objects are handed over, not deleted",
				"resource", gvr.GroupResource().String(), "from", gvr.Version, "objects", n)
			go s.awaitHandover(ctx, gvr.GroupResource())
		}
	}
	s.followCRDsLocked(ctx)
	s.syncCRDsLocked()
	for _, cl := range cfg.Spec.Upsync {
		for _, res := range cl.Resources {
			if res == "*" || cl.APIGroup == "*" {
				continue // wildcards need discovery of every resource; not supported yet
			}
			gvr, err := s.edgeMapper.ResourceFor(schema.GroupVersionResource{Group: cl.APIGroup, Resource: res})
			if err != nil {
				s.edgeMapper.Reset()
				klog.FromContext(ctx).Info("upsync resource not served at the edge", "group", cl.APIGroup, "resource", res, "err", err)
				continue
			}
			s.upsyncGVRs[gvr] = true
			s.ensureEdgeInformerLocked(ctx, gvr)
			if _, ok := s.upsynced[gvr]; !ok {
				g := gvr
				s.upsynced[gvr] = s.startInformer(ctx, s.mailboxCaches, gvr, upsyncedSelector, nil, handlerFunc(func(any) { s.upQ.Add(g) }))
			}
		}
	}
	for gvr := range s.upsyncGVRs {
		s.upQ.Add(gvr)
	}
	// New records to report on, or the first read of the config: the
	// server learns this syncer reports rollouts.
	s.rolloutsSoon()
}

func handlerFunc(f func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, obj any) { f(obj) }, DeleteFunc: f}
}

func (s *Syncer) copyHandler(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onCopy(gvr, obj) },
		UpdateFunc: func(_, obj any) { s.onCopy(gvr, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				s.mu.Lock()
				s.removeDesiredLocked(keyOf(gvr, u))
				s.mu.Unlock()
				s.rolloutsSoon() // a revision's copies are read whole only once the old ones have gone
			}
		},
	}
}

// onCopy follows a copy in the mailbox. A copy being deleted there (a
// namespace waits, Terminating, for the server to empty it) has left the
// mailbox: what it says is no longer desired. An event of a resource whose
// cache has stopped (the SyncerConfig no longer names it, and its copies
// were dropped with it) comes late and is ignored.
func (s *Syncer) onCopy(gvr schema.GroupVersionResource, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.copies[gvr]; !ok {
		return
	}
	if u.GetDeletionTimestamp() != nil {
		s.removeDesiredLocked(keyOf(gvr, u))
		s.rolloutsSoon()
		return
	}
	d, err := edgeObject(u, gvr, s.owner, s.id.InventorySpace+"/"+s.id.SyncTarget)
	if err != nil {
		return
	}
	s.setDesiredLocked(d)
	s.reportQ.Add(d.Key)
}

// onCRD refreshes the desired CRDs from the mailbox's.
func (s *Syncer) onCRD() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncCRDsLocked()
}

// syncCRDsLocked makes the desired CRDs those the config lists (as the
// cache has them, once it has them).
func (s *Syncer) syncCRDsLocked() {
	if s.config == nil {
		return
	}
	names := map[string]bool{}
	for _, n := range s.config.Spec.CRDs {
		names[n] = true
		if s.crds == nil {
			continue
		}
		if u := s.crds.get("", n); u != nil {
			if d, err := edgeObject(u, crdsGVR, s.owner, s.id.InventorySpace+"/"+s.id.SyncTarget); err == nil {
				s.setDesiredLocked(d)
			}
		}
	}
	for k := range s.desired {
		if k.GVR == crdsGVR && !names[k.Name] {
			s.removeDesiredLocked(k)
		}
	}
}

func (s *Syncer) setDesiredLocked(d *desired) {
	if old, ok := s.desired[d.Key]; ok && old.Hash == d.Hash && old.CreateOnly == d.CreateOnly {
		// The same content: nothing to do at the edge. A new rollout
		// revision of it (or a copy whose content hash changed with it)
		// is still the one to report applied: the edge object already
		// has its content.
		if old.Revision != d.Revision || old.ContentHash != d.ContentHash {
			s.desired[d.Key] = d
		}
		return
	}
	s.desired[d.Key] = d
	s.markDirtyLocked()
	s.downQ.Add(d.Key)
}

func (s *Syncer) removeDesiredLocked(k objKey) {
	if _, ok := s.desired[k]; !ok {
		return
	}
	delete(s.desired, k)
	s.markDirtyLocked()
	if isContainer(k.GVR) {
		// Its grace period starts now, again if it left and came back.
		s.removing[k] = s.now()
	}
	s.downQ.Add(k)
}

// otherVersions are the versions of gvr's resource among the keys of m,
// but gvr's own.
func otherVersions[V any](m map[schema.GroupVersionResource]V, gvr schema.GroupVersionResource) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for g := range m {
		if g.GroupResource() == gvr.GroupResource() && g != gvr {
			out = append(out, g)
		}
	}
	return out
}

// desiredInAnotherVersionLocked says whether the object of key is desired
// under another version of its resource: the edge object is that key's
// then, not key's to delete. s.mu is held.
func (s *Syncer) desiredInAnotherVersionLocked(key objKey) bool {
	for _, gvr := range otherVersions(s.copies, key.GVR) {
		if _, ok := s.desired[objKey{GVR: gvr, Namespace: key.Namespace, Name: key.Name}]; ok {
			return true
		}
	}
	return false
}

// awaitHandover waits until the caches of every version of gr the
// SyncerConfig wants have read the mailbox, then lets the removal of the
// objects handed over to them proceed: until then, which of them the new
// version holds is not known. reconcileDownsync keeps at the edge those
// desired under another version and deletes the others, as it would have
// at once had the resource left the config.
func (s *Syncer) awaitHandover(ctx context.Context, gr schema.GroupResource) {
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for gvr, r := range s.copies {
			if gvr.GroupResource() == gr && !r.synced() {
				return false, nil
			}
		}
		for k := range s.handover {
			if k.GVR.GroupResource() == gr {
				delete(s.handover, k)
				s.downQ.Add(k)
			}
		}
		return true, nil
	})
}

// awaitFirstSync waits until the mailbox has been read whole, then lets
// removals happen: what the saved state held but the mailbox no longer does
// is removed, and the initial count is reported.
func (s *Syncer) awaitFirstSync(ctx context.Context) {
	err := pollGrowing(ctx, 100*time.Millisecond, func() (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.config == nil || s.configInf == nil || !s.configInf.synced() || (s.crds != nil && !s.crds.synced()) {
			return false, nil
		}
		for _, r := range s.copies {
			if !r.synced() {
				return false, nil
			}
		}
		for k := range s.desired {
			if k.GVR == crdsGVR {
				continue
			}
			r, ok := s.copies[k.GVR]
			if !ok || r.get(k.Namespace, k.Name) == nil {
				s.removeDesiredLocked(k)
			}
		}
		s.live = true
		// Every namespace the syncer made is looked at once: one that left
		// the mailbox before a restart is kept, or removed, by the rule.
		s.ensureEdgeInformerLocked(ctx, namespacesGVR)
		for k := range s.desired {
			s.downQ.Add(k)
		}
		for k := range s.deferred {
			s.downQ.Add(k)
		}
		s.deferred = nil
		return true, nil
	})
	if err != nil {
		return
	}
	// Report once the first pass is through.
	_ = pollGrowing(ctx, 200*time.Millisecond, func() (bool, error) {
		if s.downQ.Len() > 0 {
			return false, nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.inStep)+len(s.problems) < len(s.desired) {
			return false, nil
		}
		s.progress("%d objects synced to the edge cluster (%d with problems)", len(s.inStep), len(s.problems))
		return true, nil
	})
}

// pollCeiling is the longest pollGrowing waits between two looks.
const pollCeiling = time.Second

// pollGrowing calls cond at once and then again after first, each wait
// half as long again as the last, up to pollCeiling, until cond is done,
// fails or ctx is. A syncer waits so for its first read of the mailbox
// while a busy server answers it: at a steady 100 ms, thousands of
// syncers waiting in one process (make bench's simulated edges) woke
// tens of thousands of times a second between them, a tenth of the
// process's CPU while the server was slow.
func pollGrowing(ctx context.Context, first time.Duration, cond func() (bool, error)) error {
	return growingBackoff(first).DelayFunc().Until(ctx, true, true, func(context.Context) (bool, error) { return cond() })
}

// growingBackoff is pollGrowing's waits: from first, half as long again
// each time, then pollCeiling from when they reach it on.
func growingBackoff(first time.Duration) wait.Backoff {
	return wait.Backoff{Duration: first, Factor: 1.5, Cap: pollCeiling, Steps: math.MaxInt32}
}

// saveLoop saves the desired state at most once a second while it changes.
func (s *Syncer) saveLoop(ctx context.Context) {
	save := func() {
		s.mu.Lock()
		if !s.dirty || s.id.MailboxSpace == "" {
			s.mu.Unlock()
			return
		}
		objs := make([]*desired, 0, len(s.desired))
		for _, d := range s.desired {
			objs = append(objs, d)
		}
		id := s.id
		s.dirty = false
		s.mu.Unlock()
		if err := saveState(s.opts.DataDir, id, objs); err != nil {
			klog.FromContext(ctx).Error(err, "cannot save the desired state", "dataDir", s.opts.DataDir)
			s.mu.Lock()
			s.markDirtyLocked() // tried again in a second
			s.mu.Unlock()
		}
	}
	for {
		select {
		case <-ctx.Done():
			save()
			return
		case <-s.saveSoon:
		}
		// A change seldom comes alone (a mailbox read, a fan-out): the
		// state is saved a second after the first, with what followed.
		select {
		case <-ctx.Done():
			save()
			return
		case <-time.After(saveDelay):
		}
		save()
	}
}

// saveDelay is how long after a change of the desired state it is saved.
// The loop sleeps while nothing changes: a ticker per syncer was a
// thousand wakeups a second in a simulator of a thousand syncers at rest.
const saveDelay = time.Second

// markDirtyLocked says desired changed since it was saved, and wakes the
// save loop. s.mu is held.
func (s *Syncer) markDirtyLocked() {
	s.dirty = true
	select {
	case s.saveSoon <- struct{}{}:
	default:
	}
}

// startTunnel keeps the reverse tunnel to the server open, through which
// the center reaches the edge cluster's API.
func (s *Syncer) startTunnel(ctx context.Context, start func(int, func())) error {
	edge, err := tunnel.EdgeHandler(s.edgeCfg)
	if err != nil {
		return fmt.Errorf("edge cluster: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca)
	client := &tunnel.Client{Servers: s.opts.Servers(), BearerToken: s.tok.Bearer(), Proxy: s.opts.ProxyFunc(), Edge: edge, Transport: s.apiTransport,
		TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		OnChange: func(open bool) {
			s.tunnelOpen.Store(open)
			if open {
				s.progress("tunnel open")
			} else {
				s.progress("tunnel closed; reconnecting")
			}
		}}
	start(1, func() { client.Run(ctx) })
	return nil
}

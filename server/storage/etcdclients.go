// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	kinetls "github.com/k3s-io/kine/pkg/tls"
	"github.com/kubestellar/kubestellar/spaces"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"k8s.io/apimachinery/pkg/runtime"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/server/egressselector"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/utils/clock"
)

// The etcd client's settings, those of kube-apiserver's storage factory
// (k8s.io/apiserver/pkg/storage/storagebackend/factory): a connection is
// given 20 seconds (TLS on a loaded machine can take that long), and a
// keepalive finds a dead etcd member within 40 seconds.
const (
	etcdDialTimeout      = 20 * time.Second
	etcdKeepaliveTime    = 30 * time.Second
	etcdKeepaliveTimeout = 10 * time.Second
)

// etcdClients are the clients the API server's storage reaches an etcd
// cluster with (the datastore when --datastore-endpoint names one): one
// per distinct transport configuration, shared by every resource's storage
// on it, where kube-apiserver's storage factory makes one per resource (a
// connection and a logger each, for hundreds of resources). A client's KV
// and Watcher honour spaces.WithKeptSpaces, as the in-process client's do
// on kine: a list or watch that keeps some spaces never decodes another's
// objects. A client is closed when the last storage on it is destroyed, or
// when the datastore stops.
type etcdClients struct {
	// logger is the datastore's (Start).
	logger logr.Logger

	mu      sync.Mutex
	clients map[string]*etcdClient
	stopped bool
}

// etcdClient is a client shared by the storages on one transport, with
// the compactor of its cluster.
type etcdClient struct {
	client *kubernetes.Client
	// refs counts the storages on the client.
	refs int
	// compactor asks etcd to compact its history every interval, as
	// kube-apiserver does (etcd keeps every revision otherwise), from the
	// first storage that asks for compaction on; nil until then.
	compactor stoppableCompactor
	interval  time.Duration
	// retired is the compaction revision a compactor replaced by one of a
	// shorter interval had seen, which the next one has not yet.
	retired int64
}

// stoppableCompactor is what etcd3.NewCompactor returns.
type stoppableCompactor interface {
	etcd3.Compactor
	Stop()
}

// errStopped is the error of a storage built once the datastore stopped.
var errStopped = errors.New("the datastore has stopped")

// acquire returns the client for transport, connected, and, when interval
// is not zero, the compactor that compacts its cluster at least that often
// (one per client: the shortest interval asked for wins, as in
// kube-apiserver). release gives the client back; the last release closes
// it.
func (e *etcdClients) acquire(transport storagebackend.TransportConfig, interval time.Duration) (_ *kubernetes.Client, _ etcd3.Compactor, release func(), _ error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, nil, nil, errStopped
	}
	// The transport's every field, as kube-apiserver tells its compactors
	// apart: endpoints, TLS files, and the identity of the egress lookup
	// and tracer provider.
	key := fmt.Sprintf("%v", transport)
	c := e.clients[key]
	if c == nil {
		client, err := newEtcdClient(transport)
		if err != nil {
			return nil, nil, nil, err
		}
		e.logger.V(2).Info("connected to etcd for the API server's storage", "endpoints", redactAll(transport.ServerList))
		c = &etcdClient{client: client}
		if e.clients == nil {
			e.clients = map[string]*etcdClient{}
		}
		e.clients[key] = c
	}
	var compactor etcd3.Compactor
	if interval > 0 {
		if c.compactor == nil || interval < c.interval {
			if c.compactor != nil {
				c.retired = max(c.retired, c.compactor.CompactRevision())
				c.compactor.Stop()
			}
			// One compactor per cluster and process is not needed for
			// correctness: compactors agree on a key in etcd which of them
			// compacts each round, as those of several API servers do.
			c.compactor, c.interval = etcd3.NewCompactor(c.client.Client, interval, clock.RealClock{}, nil), interval
		}
		compactor = sharedCompactor{e, c}
	}
	c.refs++
	var once sync.Once
	return c.client, compactor, func() { once.Do(func() { e.release(key, c) }) }, nil
}

// release gives back a client that acquire returned under key.
func (e *etcdClients) release(key string, c *etcdClient) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c.refs--
	if c.refs > 0 || e.clients[key] != c {
		return
	}
	delete(e.clients, key)
	e.close(c)
}

// stop closes every client; storages built afterwards fail.
func (e *etcdClients) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	for key, c := range e.clients {
		delete(e.clients, key)
		e.close(c)
	}
}

// close stops c's compactor and closes its connection; e.mu is held.
func (e *etcdClients) close(c *etcdClient) {
	if c.compactor != nil {
		c.compactor.Stop()
	}
	if err := c.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		e.logger.Error(err, "closing an etcd client of the API server's storage")
	}
}

// open counts the clients open, for tests.
func (e *etcdClients) open() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.clients)
}

// sharedCompactor is the compactor of a shared client, as a storage sees
// it: whichever compactor the client runs now, its compaction revision
// never going back when one replaces another.
type sharedCompactor struct {
	e *etcdClients
	c *etcdClient
}

func (s sharedCompactor) CompactRevision() int64 {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if s.c.compactor == nil {
		return s.c.retired
	}
	return max(s.c.retired, s.c.compactor.CompactRevision())
}

// newEtcdClient connects to the etcd cluster of transport as
// kube-apiserver's storage factory does (its TLS files, egress dialer,
// timeouts and keepalive; see etcdDialTimeout), with a KV and Watcher that
// honour spaces.WithKeptSpaces and the KV's latency tracked for the API
// server's request metrics. It returns once the connection is ready, or
// fails after etcdDialTimeout.
//
// It leaves out what the factory adds from modules this one does not
// require directly: the gRPC client's Prometheus metrics (the factory
// registers its own collector, which is not reachable to count these
// clients' calls) and OpenTelemetry's gRPC instrumentation (which only
// propagates traces; the server configures no tracer provider). Each
// client logs with the etcd client's default logger, which the factory
// shares among its clients, one per resource; here there are few.
func newEtcdClient(transport storagebackend.TransportConfig) (*kubernetes.Client, error) {
	tlsConfig, err := kinetls.Config{CAFile: transport.TrustedCAFile, CertFile: transport.CertFile, KeyFile: transport.KeyFile}.ClientConfig()
	if err != nil {
		return nil, err
	}
	var dialOptions []grpc.DialOption
	if transport.EgressLookup != nil {
		dial, err := transport.EgressLookup(egressselector.Etcd.AsNetworkContext())
		if err != nil {
			return nil, err
		}
		if dial != nil {
			dialOptions = append(dialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return dial(ctx, "tcp", addr)
			}))
		}
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            transport.ServerList,
		TLS:                  tlsConfig,
		DialTimeout:          etcdDialTimeout,
		DialKeepAliveTime:    etcdKeepaliveTime,
		DialKeepAliveTimeout: etcdKeepaliveTimeout,
		DialOptions:          dialOptions,
	})
	if err != nil {
		return nil, err
	}
	if err := waitConnected(c, etcdDialTimeout); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.KV = etcd3.NewETCDLatencyTracker(keptSpacesKV{c.KV})
	// No progress markers: etcd orders its progress notifications with
	// the watch's events, which kine on SQLite does not (see
	// keptSpacesWatcher).
	c.Watcher = keptSpacesWatcher{Watcher: c.Watcher}
	client := &kubernetes.Client{Client: c}
	client.Kubernetes = client
	return client, nil
}

// waitConnected returns once c's connection is ready, asking it to connect
// when idle, or fails after timeout: a storage on an etcd that cannot be
// reached fails when it is built, as in kube-apiserver, rather than at its
// first request.
func waitConnected(c *clientv3.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn := c.ActiveConnection()
	if conn == nil {
		return errors.New("the etcd client has no connection")
	}
	for {
		state := conn.GetState()
		switch state {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, state) {
			return fmt.Errorf("the connection to etcd is not ready (%s): %w", state, ctx.Err())
		}
	}
}

// etcdStorage is kube-apiserver's etcd3 storage of a resource on the etcd
// cluster of config.Transport, as its storage factory builds it
// (generic.NewRawStorage), but on a shared client whose reads and watches
// honour spaces.WithKeptSpaces (etcdClients).
func (d *Datastore) etcdStorage(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (apiserverstorage.Interface, factory.DestroyFunc, error) {
	client, compactor, release, err := d.etcdClients.acquire(config.Transport, config.CompactionInterval)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %s: %w", config.GroupResource, err)
	}
	versioner := apiserverstorage.APIObjectVersioner{}
	transformer := config.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	decoder := etcd3.NewDefaultDecoder(config.Codec, versioner)
	// With AllowUnsafeMalformedObjectDeletion, an object that cannot be
	// read may be deleted, as in kube-apiserver.
	unsafeDeletion := utilfeature.DefaultFeatureGate.Enabled(genericfeatures.AllowUnsafeMalformedObjectDeletion)
	if unsafeDeletion {
		transformer = etcd3.WithCorruptObjErrorHandlingTransformer(transformer)
		decoder = etcd3.WithCorruptObjErrorHandlingDecoder(decoder)
	}
	store, err := etcd3.New(client, compactor, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix, config.GroupResource,
		transformer, config.LeaseManagerConfig, decoder, versioner)
	if err != nil {
		release()
		return nil, nil, err
	}
	var s apiserverstorage.Interface = store
	if unsafeDeletion {
		s = etcd3.NewStoreWithUnsafeCorruptObjectDeletion(s, config.GroupResource)
	}
	// The API server destroys a storage once per subresource that shares
	// it.
	destroy := sync.OnceFunc(func() {
		store.Close()
		release()
	})
	return spaces.CorrectEmptyLists(s), destroy, nil
}

// redactAll is Redact of each endpoint.
func redactAll(endpoints []string) []string {
	out := make([]string, len(endpoints))
	for i, ep := range endpoints {
		out[i] = Redact(ep)
	}
	return out
}

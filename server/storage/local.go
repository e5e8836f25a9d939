// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3s-io/kine/pkg/drivers"
	"github.com/k3s-io/kine/pkg/drivers/sqlite"
	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/k3s-io/kine/pkg/logstructured/sqllog"
	"github.com/k3s-io/kine/pkg/server"
	"github.com/k3s-io/kine/pkg/util"
	"github.com/kubestellar/kubestellar/spaces"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	"k8s.io/klog/v2"
)

// The etcd API kine serves: the version it emulates (kine answers the
// watch progress requests of etcd 3.6, which the watch cache's consistent
// reads use) and how often an idle watch hears of the current revision.
const (
	emulatedETCDVersion = "3.6.11"
	notifyInterval      = 5 * time.Second
	// grpcStopTimeout bounds a graceful stop of kine's socket, as kine's
	// own command does.
	grpcStopTimeout = 2 * time.Second
)

// listen starts kine's backend for cfg.Endpoint and serves its etcd API
// twice: in-process, to the API server's storage (Datastore.local), and on
// a unix socket at socket, to the server's other etcd clients. For an etcd
// endpoint kine has no backend: the endpoints are used as they are.
//
// The API server's every read and write goes through the in-process
// client: plain function calls into kine's etcd API, as etcd's own
// v3client makes them into an embedded etcd, where a socket would add
// gRPC's framing, a protobuf encoding each way and two system calls.
func listen(ctx context.Context, wg *sync.WaitGroup, socket string, cfg *drivers.Config) (_ *Datastore, err error) {
	backendCtx, stopBackend := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			stopBackend()
		}
	}()
	var backend server.Backend
	// On SQLite the in-process client's watches are served by our own
	// watch server over the demultiplexer (watchServer); on the other
	// backends by kine's. On every backend of kine's the storage's plain
	// watches are served by the demultiplexer (directWatches).
	var watches *watchServer
	var demux *demuxLog
	if strings.HasPrefix(cfg.Endpoint, "sqlite://") {
		backend, _, demux, err = newSQLiteBackend(backendCtx, wg, cfg)
		if err == nil {
			watches = newWatchServer(demux)
		}
	} else {
		_, backend, err = drivers.New(backendCtx, wg, cfg)
		if log, ok := logOf(backend); ok {
			demux = newDemuxLog(backendCtx, log)
		} else if backend != nil {
			klog.FromContext(ctx).Info("kine's log could not be reached: every watch is served by kine's watch server", "backend", fmt.Sprintf("%T", backend))
		}
	}
	if err != nil {
		return nil, err
	}
	if backend == nil {
		stopBackend()
		return &Datastore{Endpoints: strings.Split(cfg.Endpoint, ","), TLS: cfg.BackendTLSConfig}, nil
	}
	if err := backend.Start(backendCtx); err != nil {
		return nil, fmt.Errorf("starting kine: %w", err)
	}
	var served server.Backend = uncountedPages{backend}
	bridge := server.New(served, "unix", notifyInterval, emulatedETCDVersion)

	srv := grpc.NewServer(
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Hour, Timeout: 20 * time.Second}),
		grpc.MaxRecvMsgSize(2*1024*1024),
	)
	bridge.Register(srv)
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("removing the old socket %s: %w", socket, err)
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("kine's socket: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		lis.Close()
		return nil, err
	}
	var watchAPI etcdserverpb.WatchServer = bridge
	var progress func()
	if watches != nil {
		watchAPI, progress = watches, watches.demux.requestProgress
	}
	local := localClient(backendCtx, bridge, watchAPI, progress)
	mailboxEvents := &atomic.Bool{}
	usage := usageClient(backendCtx, bridge, watchAPI, mailboxEvents)
	// etcd_request_duration_seconds and the rest, as for kube-apiserver's
	// clients.
	local.KV = etcd3.NewETCDLatencyTracker(local.KV)
	// The watch cache serves consistent reads only once the storage is
	// known to answer progress requests, which the API server learns from
	// each client's endpoints' versions: the in-process client has none,
	// so it is asked here, as one endpoint.
	etcdfeature.DefaultFeatureSupportChecker.CheckClient(backendCtx, inProcessEndpoint{local, "unix://" + socket}, apiserverstorage.RequestWatchProgress)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			klog.FromContext(ctx).Error(err, "kine's socket stopped serving", "socket", socket)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		// The in-process clients first: their watches end with them.
		_ = local.Close()
		_ = usage.Close()
		timer := time.AfterFunc(grpcStopTimeout, srv.Stop)
		srv.GracefulStop()
		timer.Stop()
		stopBackend()
	}()
	return &Datastore{Endpoints: []string{"unix://" + socket}, local: local, demux: demux, usage: usage, usageMailboxes: mailboxEvents}, nil
}

// localClient is an etcd client whose calls are function calls into kine's
// etcd API, through etcd's adapters from servers to clients. progress,
// when set, asks for progress markers (demuxLog.requestProgress), which
// its watches get instead of kine's progress notifications.
func localClient(ctx context.Context, bridge *server.KVServerBridge, watchAPI etcdserverpb.WatchServer, progress func()) *clientv3.Client {
	c := clientv3.NewCtxClient(ctx)
	c.KV = keptSpacesKV{clientv3.NewKVFromKVClient(adapter.KvServerToKvClient(bridge), c)}
	watches := queuedWatchClient{WatchClient: adapter.WatchServerToWatchClient(watchAPI), marked: progress != nil}
	c.Watcher = keptSpacesWatcher{Watcher: clientv3.NewWatchFromWatchClient(watches, c), progress: progress}
	c.Lease = clientv3.NewLeaseFromLeaseClient(adapter.LeaseServerToLeaseClient(bridge), c, time.Second)
	c.Maintenance = clientv3.NewMaintenanceFromMaintenanceClient(adapter.MaintenanceServerToMaintenanceClient(bridge), c)
	c.Cluster = clientv3.NewClusterFromClusterClient(adapter.ClusterServerToClusterClient(bridge), c)
	return c
}

// usageClient is an in-process client for Usage, whose watches leave the
// mailboxes' events out before they are handed on until mailboxEvents is
// on: where no mailbox is counted, a fan-out's every copy would otherwise
// cross to it, only to be dropped.
func usageClient(ctx context.Context, bridge *server.KVServerBridge, watchAPI etcdserverpb.WatchServer, mailboxEvents *atomic.Bool) *clientv3.Client {
	c := clientv3.NewCtxClient(ctx)
	c.KV = clientv3.NewKVFromKVClient(adapter.KvServerToKvClient(bridge), c)
	c.Watcher = clientv3.NewWatchFromWatchClient(queuedWatchClient{WatchClient: adapter.WatchServerToWatchClient(watchAPI), mailboxEvents: mailboxEvents}, c)
	return c
}

// queuedWatchClient queues what the etcd client sends on a watch stream
// (creates, cancels, progress requests) for a goroutine of the stream to
// hand to kine. Over gRPC the transport's buffers are between them; in
// process there is only a channel, and a deadlock: the etcd client sends
// from the goroutine that also takes the responses in, and kine sends the
// answer to one request before it reads the next. The queue holds a few
// small requests per watch; the responses, as over gRPC, are buffered by
// the etcd client.
//
// With marked set, its streams' watches get progress markers
// (withProgressMarkers), but for the stream of the watches that ask for no
// progress (withoutProgressStream).
type queuedWatchClient struct {
	etcdserverpb.WatchClient
	marked bool
	// mailboxEvents, when set: its streams' watches get no event of a
	// mailbox while it is off.
	mailboxEvents *atomic.Bool
}

func (c queuedWatchClient) Watch(ctx context.Context, opts ...grpc.CallOption) (etcdserverpb.Watch_WatchClient, error) {
	if c.marked && !withoutProgress(ctx) {
		ctx = withProgressMarkers(ctx)
	}
	if c.mailboxEvents != nil {
		ctx = withMailboxEvents(ctx, c.mailboxEvents)
	}
	stream, err := c.WatchClient.Watch(ctx, opts...)
	if err != nil {
		return nil, err
	}
	q := &queuedSends{Watch_WatchClient: stream, wake: make(chan struct{}, 1)}
	go q.forward()
	return q, nil
}

// queuedSends is a watch stream whose Send never waits for kine.
type queuedSends struct {
	etcdserverpb.Watch_WatchClient
	wake chan struct{}

	mu      sync.Mutex
	pending []*etcdserverpb.WatchRequest
	closing bool  // CloseSend after the pending requests
	err     error // the stream's, once a send failed
}

func (q *queuedSends) Send(r *etcdserverpb.WatchRequest) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	q.pending = append(q.pending, r)
	q.signal()
	return nil
}

func (q *queuedSends) CloseSend() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing = true
	q.signal()
	return nil
}

// signal wakes forward; q.mu is held.
func (q *queuedSends) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// forward hands the queued requests to kine, in order, until the stream
// ends.
func (q *queuedSends) forward() {
	done := q.Context().Done()
	for {
		select {
		case <-q.wake:
		case <-done:
			return
		}
		q.mu.Lock()
		batch, closing := q.pending, q.closing
		q.pending = nil
		q.mu.Unlock()
		for _, r := range batch {
			if err := q.Watch_WatchClient.Send(r); err != nil {
				q.mu.Lock()
				q.err = err
				q.mu.Unlock()
				return
			}
		}
		if closing {
			_ = q.Watch_WatchClient.CloseSend()
			return
		}
	}
}

// inProcessEndpoint presents the in-process client as one endpoint, for
// the API server's check of the etcd version.
type inProcessEndpoint struct {
	*clientv3.Client
	name string
}

func (e inProcessEndpoint) Endpoints() []string { return []string{e.name} }

// rawStorageFunc builds a resource's storage on the datastore, without a
// cache.
type rawStorageFunc func(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (apiserverstorage.Interface, factory.DestroyFunc, error)

// rawStorage is kube-apiserver's etcd3 storage of a resource, on the
// in-process client when kine runs here (every resource shares it: a call
// is a function call, not a connection), else on a client to the etcd
// cluster shared by the resources (etcdStorage). Either client's lists and
// watches honour spaces.WithKeptSpaces. On SQLite its plain watches are
// served from the demultiplexer (directWatches). Its empty lists report a
// revision read before them (spaces.CorrectEmptyLists).
func (d *Datastore) rawStorage(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (apiserverstorage.Interface, factory.DestroyFunc, error) {
	if d != nil && d.local == nil {
		return d.etcdStorage(config, newFunc, newListFunc, resourcePrefix)
	}
	if d == nil {
		// No datastore to share a client with: kube-apiserver's storage,
		// whose client does not honour spaces.WithKeptSpaces.
		store, destroy, err := generic.NewRawStorage(config, newFunc, newListFunc, resourcePrefix)
		if err != nil {
			return nil, nil, err
		}
		return spaces.CorrectEmptyLists(store), destroy, nil
	}
	client := &kubernetes.Client{Client: d.local}
	client.Kubernetes = client
	versioner := apiserverstorage.APIObjectVersioner{}
	transformer := config.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	// No compactor: kine compacts its own history (Compacts).
	store, err := etcd3.New(client, nil, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix, config.GroupResource,
		transformer, config.LeaseManagerConfig, etcd3.NewDefaultDecoder(config.Codec, versioner), versioner)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	var s apiserverstorage.Interface = store
	if d.demux != nil {
		pathPrefix := path.Join("/", config.Prefix)
		if !strings.HasSuffix(pathPrefix, "/") {
			pathPrefix += "/"
		}
		s = &directWatches{Interface: store, demux: d.demux, kv: d.local.KV, codec: config.Codec, versioner: versioner,
			transformer: transformer, newFunc: newFunc, pathPrefix: pathPrefix, resourcePrefix: resourcePrefix}
	}
	return spaces.CorrectEmptyLists(s), func() { once.Do(store.Close) }, nil
}

// sourceStorage builds the storage a resource's watch cache fills from,
// when kine runs here: a store of its own on the in-process client, beside
// the resource's (rawStorage), or nil to share the resource's.
//
// The API server's storage estimates its objects' sizes (for the cost
// estimates of API Priority and Fairness) from every key its lists and
// watches see, until a cleanup each minute keeps those the cache holds. On
// the resource's storage those are also the mailboxes' copies, which the
// controllers' wildcard watches and lists, and each syncer's, read: 100,000
// keys held between cleanups after a fan-out, a million after a restart
// with 10,000 mailboxes. The cache's own store sees what the cache keeps,
// its lists and watches being narrowed by key (spaces.Source.ByKey), and
// the resource's store estimates nothing, as it is never asked.
func (d *Datastore) sourceStorage() rawStorageFunc {
	if d == nil || d.local == nil {
		return nil
	}
	return d.rawStorage
}

// newSQLiteBackend is kine's SQLite backend for cfg.Endpoint (sqlite://),
// with its writes taking turns in the process rather than in SQLite and
// its watches served from one subscription (demuxLog).
//
// SQLite has one writer at a time. kine writes on a pool of connections,
// so that under concurrent writes (the placement translator's copies, a
// tenant's 64 writers) every writer but one finds the database locked, and
// SQLite's busy handler puts each to sleep for 1, 2, 5, 10 and more
// milliseconds before it tries again, whether the lock has been free for
// long or not. With LockWrites, kine's dialect holds a mutex around each
// write statement: the writers queue in Go and the next one starts the
// moment the last one ends. Reads are not affected (write-ahead logging
// lets them run beside the writer). In make bench's fan-out of 100,000
// copies this took about a tenth off the server's CPU per copy. The
// inserts that queue are committed together, and a range is read a page
// at a time (sqliteDialect).
func newSQLiteBackend(ctx context.Context, wg *sync.WaitGroup, cfg *drivers.Config) (server.Backend, *sqliteDialect, *demuxLog, error) {
	cfg.Scheme, cfg.DataSourceName = util.SchemeAndAddress(cfg.Endpoint)
	// NewVariant opens and prepares the database; its backend, not yet
	// started, is left unused for one built as kine builds it, on our
	// dialect.
	_, dialect, err := sqlite.NewVariant(ctx, wg, "sqlite3", cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	dialect.LockWrites = true
	withScalarRevisions(dialect)
	ours := newSQLiteDialect(ctx, wg, dialect)
	log := sqllog.New(ours, wg, cfg)
	return logstructured.New(log), ours, newDemuxLog(ctx, log), nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package storage runs the server's datastore: kine in-process, over SQLite
// in the data directory by default or over any datastore kine supports, and
// builds the API server's per-resource storage on top of it. For SQLite it
// also compacts the history and keeps the files on disk bounded (see
// README.md in this directory).
package storage

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3s-io/kine/pkg/drivers"
	kinetls "github.com/k3s-io/kine/pkg/tls"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/klog/v2"

	// kine's datastore drivers register themselves with kine.
	_ "github.com/k3s-io/kine/pkg/drivers/mysql"
	_ "github.com/k3s-io/kine/pkg/drivers/nats"
	_ "github.com/k3s-io/kine/pkg/drivers/pgsql"
	_ "github.com/k3s-io/kine/pkg/drivers/remote" // etcd, passed through
	_ "github.com/k3s-io/kine/pkg/drivers/sqlite"
)

// SQLiteParams are the connection parameters of the embedded SQLite
// datastore: write-ahead logging, a busy timeout, synchronous=NORMAL (with
// WAL, a committed transaction survives a crash of the process; only a power
// loss may lose the last ones) and immediate write transactions.
const SQLiteParams = "_journal_mode=WAL&_busy_timeout=30000&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=20&cache=shared"

// kineMaintenanceOff are the parameters of a sqlite:// endpoint that turn
// off what kine would do to the file on its own, since the maintainer does
// it in short turns (see sqlite.go): a FULL checkpoint after each
// compaction, which holds every writer back for up to the busy timeout
// (30 s) until the readers of older snapshots are done, and a VACUUM at each
// start, which rewrites the whole file (and needs its size in free disk) on
// the way to ready. kine looks for the names; SQLite ignores them.
var kineMaintenanceOff = []string{"_kine_disable_compact_wal_checkpoint", "_kine_disable_startup_vacuum"}

// maintainedByUs adds kineMaintenanceOff to a sqlite:// endpoint that does
// not name them already.
func maintainedByUs(endpointURL string) string {
	for _, param := range kineMaintenanceOff {
		if strings.Contains(endpointURL, param) {
			continue
		}
		sep := "&"
		if !strings.Contains(endpointURL, "?") {
			sep = "?"
		}
		endpointURL += sep + param + "=true"
	}
	return endpointURL
}

// Datastore is kine serving the etcd API on a unix socket in the data
// directory. For an etcd endpoint, kine is not started and the endpoint is
// used as it is.
type Datastore struct {
	// Endpoints are the etcd endpoints the API server uses.
	Endpoints []string
	// TLS secures the connection to Endpoints: set for an etcd cluster
	// reached directly, empty for kine's socket.
	TLS kinetls.Config
	// etcd is true when Endpoints are an etcd cluster rather than kine.
	etcd bool
	// local reaches kine in-process, for the API server's storage; nil for
	// an etcd cluster (see listen).
	local *clientv3.Client
	// demux serves the watches of the in-process client on SQLite, and
	// the storage's own (directWatches) on every datastore kine serves;
	// nil on an etcd cluster.
	demux *demuxLog
	// usage reaches kine in-process for Usage, without the mailboxes'
	// events until usageMailboxes is on; nil for an etcd cluster.
	usage          *clientv3.Client
	usageMailboxes *atomic.Bool
	cancel         context.CancelFunc
	wg             *sync.WaitGroup
	// maintainer compacts the SQLite datastore and bounds its files; nil
	// for other datastores, which kine compacts itself.
	maintainer *maintainer
	// stopMaintainer stops maintainer's loop and waits for it.
	stopMaintainer func()
	// caches are the watch caches on this datastore (StopCaches).
	caches watchCaches
	// decodes are the objects its storages decoded last (recentDecodes).
	decodes recentDecodes
	// etcdClients reach an etcd cluster for the API server's storage;
	// unused on kine (see rawStorage).
	etcdClients etcdClients
}

// StopCaches stops every watch cache on the datastore at once, and returns
// when they have stopped: for a server's shutdown, once no request is
// served, before the API server destroys each resource's storage (which
// then has no cache left to stop).
func (d *Datastore) StopCaches() { d.caches.stopAll() }

// Config says which datastore to use and how to reach it.
type Config struct {
	// Endpoint is a kine endpoint; empty means SQLite in DataDir.
	Endpoint string
	DataDir  string
	// TLS files for the connection to the datastore: an etcd cluster, or a
	// PostgreSQL or MySQL server (kine adds them to the connection).
	CAFile, CertFile, KeyFile string
	// CompactInterval is how often history is compacted
	// (DefaultCompactInterval when zero).
	CompactInterval time.Duration
	// CompactMinRetain is how many of the latest revisions compaction
	// always keeps (DefaultCompactMinRetain when zero).
	CompactMinRetain int64
}

// compactTimeout bounds each of kine's compaction transactions (of
// CompactBatchSize revisions) on PostgreSQL and MySQL. kine's default is
// 5 s (sqliteCompactTimeout), but kine v0.17.5 ends the process
// (logrus.Fatal) when a compaction's commit fails, and a deadline that
// passes after the delete and before the commit fails it: one of three
// servers on PostgreSQL, sharing two cores with a fan-out of 30,000
// copies, exited so. A batch normally takes milliseconds; a minute leaves
// a starved server that margin, at the cost of the compact_rev_key row
// staying locked longer for the other servers' compactors when the
// database is that slow.
const (
	compactTimeout       = time.Minute
	sqliteCompactTimeout = 5 * time.Second
)

// DefaultEndpoint returns the SQLite endpoint in dataDir.
func DefaultEndpoint(dataDir string) string {
	return "sqlite://" + filepath.Join(dataDir, "db", "state.db") + "?" + SQLiteParams
}

// Start starts kine for cfg.Endpoint (DefaultEndpoint when empty). It keeps
// running until Stop.
func Start(ctx context.Context, cfg Config) (*Datastore, error) {
	logger := klog.FromContext(ctx)
	endpointURL := cfg.Endpoint
	if endpointURL == "" {
		endpointURL = DefaultEndpoint(cfg.DataDir)
	}
	if strings.HasPrefix(endpointURL, "sqlite://") {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, "db"), 0o700); err != nil {
			return nil, err
		}
	}
	if err := CheckEndpoint(endpointURL); err != nil {
		return nil, err
	}
	compactInterval, minRetain := cfg.CompactInterval, cfg.CompactMinRetain
	if compactInterval <= 0 {
		compactInterval = DefaultCompactInterval
	}
	if minRetain <= 0 {
		minRetain = DefaultCompactMinRetain
	}
	path := sqlitePath(endpointURL)
	if path != "" {
		endpointURL = maintainedByUs(endpointURL)
		if err := prepareSQLite(ctx, path); err != nil {
			return nil, err
		}
	}
	logger.Info("starting datastore", "endpoint", Redact(endpointURL), "compactInterval", compactInterval, "compactMinRetain", minRetain)
	kineCompactInterval, kineCompactTimeout := compactInterval, compactTimeout
	if path != "" {
		// Compaction runs in maintainer, followed by reclaim and checkpoint;
		// kine compacts on request when its own compactor is off. SQLite
		// has one writer: a compaction that runs long holds up every
		// write, so it keeps kine's own timeout.
		kineCompactInterval, kineCompactTimeout = 0, sqliteCompactTimeout
	}
	kineCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wg := &sync.WaitGroup{}
	d, err := listen(kineCtx, wg, filepath.Join(cfg.DataDir, "kine.sock"), &drivers.Config{
		Endpoint:         endpointURL,
		BackendTLSConfig: kinetls.Config{CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile},
		// kine's own defaults (its command's flags), with compaction on as
		// k3s runs it (for SQLite, on request from maintainer).
		CompactInterval:  kineCompactInterval,
		CompactTimeout:   kineCompactTimeout,
		CompactMinRetain: minRetain,
		CompactBatchSize: 1000,
		PollBatchSize:    500,
		PollInterval:     time.Second,
	})
	if err != nil {
		cancel()
		wg.Wait()
		// kine's errors may quote the endpoint (a URL that does not parse).
		return nil, fmt.Errorf("starting datastore %s: %w", Redact(endpointURL), RedactError(endpointURL, err))
	}
	d.etcd, d.cancel, d.wg = IsEtcd(endpointURL), cancel, wg
	d.etcdClients.logger = logger
	if path != "" {
		if err := d.startMaintainer(ctx, path, compactInterval, minRetain); err != nil {
			d.Stop()
			return nil, err
		}
	}
	return d, nil
}

// startMaintainer starts compacting the SQLite datastore at path every
// interval, until Stop.
func (d *Datastore) startMaintainer(ctx context.Context, path string, interval time.Duration, minRetain int64) error {
	file, err := openSQLite(path)
	if err != nil {
		return err
	}
	cli, err := d.Client(ctx, 5*time.Second)
	if err != nil {
		file.Close()
		return fmt.Errorf("datastore client for compaction: %w", err)
	}
	m := &maintainer{client: cli, file: file, interval: interval, minRetain: minRetain, walLimit: WALSizeLimit}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.run(mctx)
	}()
	d.maintainer = m
	d.stopMaintainer = func() {
		cancel()
		<-done
		cli.Close()
		file.Close()
	}
	return nil
}

// Compact compacts the datastore's history now, up to the current revision
// but for the last revisions kine always keeps, then bounds its files as a
// periodic compaction does. Only the SQLite datastore compacts on request;
// for others it does nothing. Tests use it instead of waiting for the next
// round.
func (d *Datastore) Compact(ctx context.Context) error {
	if d.maintainer == nil {
		return nil
	}
	return d.maintainer.compactRound(ctx, true)
}

// FileSizes returns the sizes of the SQLite datastore's files (zero for other
// datastores).
func (d *Datastore) FileSizes() (Sizes, error) {
	if d.maintainer == nil {
		return Sizes{}, nil
	}
	return d.maintainer.file.sizes()
}

// IsEtcd reports whether an endpoint is an etcd cluster, which kine passes
// through to the API server (comma-separated http, https, unix or unixs
// URLs).
func IsEtcd(endpointURL string) bool {
	scheme, _, _ := strings.Cut(endpointURL, "://")
	switch scheme {
	case "http", "https", "unix", "unixs":
		return true
	}
	return false
}

// UsageClient returns the in-process client for Usage, whose watches get
// no event of a mailbox until CountMailboxes; nil for an etcd cluster,
// which Usage reaches with Client.
func (d *Datastore) UsageClient() *clientv3.Client { return d.usage }

// CountMailboxes makes the watches of UsageClient bring the mailboxes'
// events from now on, for Usage to count them.
func (d *Datastore) CountMailboxes() {
	if d.usageMailboxes != nil {
		d.usageMailboxes.Store(true)
	}
}

// Client connects to the datastore with the etcd client.
func (d *Datastore) Client(ctx context.Context, dialTimeout time.Duration) (*clientv3.Client, error) {
	tlsConfig, err := d.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("datastore TLS: %w", err)
	}
	return clientv3.New(clientv3.Config{Endpoints: d.Endpoints, TLS: tlsConfig, DialTimeout: dialTimeout, Context: ctx})
}

// WaitReady returns once the datastore answers a read. Until then it says
// every few seconds why not, and keeps trying, as k3s does: a database may
// well start after the server (it ends only with ctx).
func (d *Datastore) WaitReady(ctx context.Context, endpointURL string) error {
	logger := klog.FromContext(ctx)
	cli, err := d.Client(ctx, 5*time.Second)
	if err != nil {
		return err
	}
	defer cli.Close()
	started := time.Now()
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Get(attempt, "/kubestellar/datastore-check", clientv3.WithCountOnly())
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("datastore %s did not answer: %w", Redact(endpointURL), err)
		}
		if cause := d.diagnose(ctx); cause != nil {
			err = cause
		}
		err = RedactError(endpointURL, err)
		hint := "is it running and reachable from here?"
		if strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "tls:") {
			hint = "check --datastore-cafile, --datastore-certfile and --datastore-keyfile"
		}
		logger.Info("waiting for the datastore", "endpoint", Redact(endpointURL), "waited", time.Since(started).Round(time.Second), "err", err.Error(), "hint", hint)
		select {
		case <-ctx.Done():
			return fmt.Errorf("datastore %s did not answer: %w", Redact(endpointURL), err)
		case <-time.After(2 * time.Second):
		}
	}
}

// diagnose finds why an etcd cluster does not answer, which its gRPC client
// keeps to itself ("context deadline exceeded"): it GETs each endpoint's
// /health over the same TLS.
func (d *Datastore) diagnose(ctx context.Context) error {
	if !d.etcd {
		return nil
	}
	tlsConfig, err := d.TLS.ClientConfig()
	if err != nil {
		return err
	}
	transport := &http.Transport{TLSClientConfig: tlsConfig}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 3 * time.Second}
	for _, ep := range d.Endpoints {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(ep, "/")+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	return nil
}

// Transport is how the API server's storage reaches the datastore.
func (d *Datastore) Transport() storagebackend.TransportConfig {
	return storagebackend.TransportConfig{ServerList: d.Endpoints, TrustedCAFile: d.TLS.CAFile, CertFile: d.TLS.CertFile, KeyFile: d.TLS.KeyFile}
}

// Compacts reports whether the datastore compacts its own history (kine
// does); an etcd cluster is compacted by the API server, as Kubernetes does.
func (d *Datastore) Compacts() bool { return !d.etcd }

// Stop stops kine and waits until its datastore is closed. The clients of
// an etcd cluster are closed: a storage still on one fails from then on.
func (d *Datastore) Stop() {
	d.etcdClients.stop()
	if d.stopMaintainer != nil {
		d.stopMaintainer()
		d.stopMaintainer = nil
	}
	d.cancel()
	d.wg.Wait()
}

// Package storage runs the server's datastore: kine in-process, over SQLite
// in the data directory by default or over any datastore kine supports, and
// builds the API server's per-resource storage on top of it.
package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/k3s-io/kine/pkg/endpoint"
	"k8s.io/klog/v2"

	// kine's datastore drivers register themselves with kine.
	_ "github.com/k3s-io/kine/pkg/drivers/mysql"
	_ "github.com/k3s-io/kine/pkg/drivers/nats"
	_ "github.com/k3s-io/kine/pkg/drivers/pgsql"
	_ "github.com/k3s-io/kine/pkg/drivers/sqlite"
)

// SQLiteParams are the connection parameters of the embedded SQLite
// datastore: write-ahead logging, a busy timeout, synchronous=NORMAL (with
// WAL, a committed transaction survives a crash of the process; only a power
// loss may lose the last ones) and immediate write transactions.
const SQLiteParams = "_journal_mode=WAL&_busy_timeout=30000&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=20&cache=shared"

// Datastore is kine serving the etcd API on a unix socket in the data
// directory. For an etcd endpoint, kine is not started and the endpoint is
// used as it is.
type Datastore struct {
	// Endpoints are the etcd endpoints the API server uses.
	Endpoints []string
	cancel    context.CancelFunc
	wg        *sync.WaitGroup
}

// DefaultEndpoint returns the SQLite endpoint in dataDir.
func DefaultEndpoint(dataDir string) string {
	return "sqlite://" + filepath.Join(dataDir, "db", "state.db") + "?" + SQLiteParams
}

// Start starts kine for endpoint (DefaultEndpoint when empty). It keeps
// running until Stop.
func Start(ctx context.Context, endpointURL, dataDir string) (*Datastore, error) {
	logger := klog.FromContext(ctx)
	if endpointURL == "" {
		endpointURL = DefaultEndpoint(dataDir)
	}
	if strings.HasPrefix(endpointURL, "sqlite://") {
		if err := os.MkdirAll(filepath.Join(dataDir, "db"), 0o700); err != nil {
			return nil, err
		}
	}
	logger.Info("starting datastore", "endpoint", Redact(endpointURL))
	kineCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	wg := &sync.WaitGroup{}
	cfg, err := endpoint.Listen(kineCtx, endpoint.Config{
		Listener:  "unix://" + filepath.Join(dataDir, "kine.sock"),
		Endpoint:  endpointURL,
		WaitGroup: wg,
		// kine's own defaults (its command's flags), with compaction on as k3s runs it.
		NotifyInterval:      5 * time.Second,
		EmulatedETCDVersion: "3.6.11",
		CompactInterval:     5 * time.Minute,
		CompactTimeout:      5 * time.Second,
		CompactMinRetain:    1000,
		CompactBatchSize:    1000,
		PollBatchSize:       500,
	})
	if err != nil {
		cancel()
		// kine's errors do not carry the endpoint, which may hold a password.
		return nil, fmt.Errorf("starting datastore %s: %w", Redact(endpointURL), err)
	}
	return &Datastore{Endpoints: cfg.Endpoints, cancel: cancel, wg: wg}, nil
}

// Stop stops kine and waits until its datastore is closed.
func (d *Datastore) Stop() {
	d.cancel()
	d.wg.Wait()
}

// Redact returns an endpoint with any password replaced, for logs and
// errors. It keeps the rest as written (no re-encoding), and handles both
// URLs (postgres://user:pw@host/db) and DSNs (user:pw@tcp(host:3306)/db).
func Redact(endpointURL string) string {
	out := endpointURL
	scheme, rest, hasScheme := strings.Cut(out, "://")
	if !hasScheme {
		scheme, rest = "", out
	}
	// user:password@host... : keep the user, hide the password. The last @
	// before the path ends the user info (passwords may contain @).
	authority, _, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo := rest[:at]
		if user, _, hasPassword := strings.Cut(userinfo, ":"); hasPassword {
			rest = user + ":REDACTED" + rest[at:]
		}
	}
	if hasScheme {
		out = scheme + "://" + rest
	} else {
		out = rest
	}
	base, query, hasQuery := strings.Cut(out, "?")
	if !hasQuery {
		return out
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		key, _, _ := strings.Cut(p, "=")
		if strings.Contains(strings.ToLower(key), "password") {
			params[i] = key + "=REDACTED"
		}
	}
	return base + "?" + strings.Join(params, "&")
}

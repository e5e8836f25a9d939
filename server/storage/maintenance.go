// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"
)

// The compaction cadence, k3s's (and kube-apiserver's against etcd): every
// interval, history is compacted up to the revision that was current one
// interval earlier, but never within the last DefaultCompactMinRetain
// revisions. A watch that falls behind by more than that gets 410 Gone and
// its client relists.
const (
	DefaultCompactInterval  = 5 * time.Minute
	DefaultCompactMinRetain = 1000
)

// revisionProbeKey is a key read for the revision in the answer, and
// written to bring kine's in-memory revision up to date (see compact).
const revisionProbeKey = "/kubestellar/datastore-check"

// walCheckInterval is how often the write-ahead log's size is checked
// against WALSizeLimit.
const walCheckInterval = 15 * time.Second

// maintainer compacts the SQLite datastore and keeps its files bounded. It
// compacts through kine's etcd API (kine's own compactor is off, so that a
// compaction is followed by reclaim and checkpoint, never run concurrently
// with them).
type maintainer struct {
	client   *clientv3.Client
	file     *sqliteFile
	interval time.Duration
	// minRetain is how many of the latest revisions kine keeps.
	minRetain int64
	// walLimit is the log size above which checkWAL truncates it.
	walLimit int64

	// mu serializes rounds: the loop's and those run by Compact.
	mu sync.Mutex
	// target is the revision the next periodic compaction compacts to: the
	// revision current at the previous round.
	target int64
}

// run compacts every m.interval and checks the log every walCheckInterval
// until ctx ends.
func (m *maintainer) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	// As kine's own compactor: the first round compacts to the revision
	// current at start.
	if current, err := m.currentRevision(ctx); err == nil {
		m.mu.Lock()
		m.target = current
		m.mu.Unlock()
	}
	compact := time.NewTicker(m.interval)
	defer compact.Stop()
	wal := time.NewTicker(walCheckInterval)
	defer wal.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-compact.C:
			if err := m.compactRound(ctx, false); err != nil && ctx.Err() == nil {
				logger.Error(err, "datastore compaction failed; trying again next round", "interval", m.interval)
			}
		case <-wal.C:
			if err := m.checkWAL(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "datastore checkpoint failed; trying again next round", "interval", walCheckInterval)
			}
		}
	}
}

// slowRound is the duration of a maintenance round above which it is logged
// at the default level, with each phase's: a round holds SQLite's write
// lock in short turns, and a long one shows up as the whole server's writes
// stalling.
const slowRound = time.Second

// compactRound compacts to m.target (to the current revision when now is
// set; kine keeps the last CompactMinRetain revisions in either case), then
// reclaims free pages and truncates the log.
func (m *maintainer) compactRound(ctx context.Context, now bool) error {
	logger := klog.FromContext(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	current, err := m.currentRevision(ctx)
	if err != nil {
		return err
	}
	target := m.target
	if now {
		target = current
	}
	m.target = current
	var took roundPhases
	if target > 0 {
		current, err = m.compact(ctx, target, current)
		if err != nil {
			return err
		}
		took.compact = time.Since(start)
		if err := m.publishCompaction(ctx, min(target, current-m.minRetain)); err != nil {
			return err
		}
	}
	before, err := m.file.sizes()
	if err != nil {
		return err
	}
	reclaimStart := time.Now()
	freed, err := m.file.reclaim(ctx)
	if err != nil {
		return fmt.Errorf("reclaiming free pages: %w", err)
	}
	checkpointStart := time.Now()
	took.reclaim = checkpointStart.Sub(reclaimStart)
	busy, err := m.file.checkpoint(ctx)
	if err != nil {
		return err
	}
	took.checkpoint = time.Since(checkpointStart)
	after, err := m.file.sizes()
	if err != nil {
		return err
	}
	took.total = time.Since(start)
	msg, l := "datastore compacted", logger.V(2)
	if took.total > slowRound {
		msg, l = "datastore maintenance round was slow; writes wait while it holds the database", logger.V(0)
	}
	l.Info(msg, "took", took.total, "compactTook", took.compact, "reclaimTook", took.reclaim, "checkpointTook", took.checkpoint,
		"target", target, "current", current, "freedPages", freed,
		"dbBytesBefore", before.DB, "walBytesBefore", before.WAL, "dbBytes", after.DB, "walBytes", after.WAL, "checkpointBusy", busy)
	return nil
}

// roundPhases are how long a maintenance round and its phases took.
type roundPhases struct {
	total, compact, reclaim, checkpoint time.Duration
}

// compact has kine compact to target. kine compacts synchronously and logs
// its own failures; it answers ErrCompacted when there is nothing new to
// compact. It checks target against the revision it keeps in memory, which
// can lag the database's: a write that races another does not advance it,
// and nothing does until a later write that races none (kine's poll does
// not). A target read from the database can then be ahead of it
// (ErrFutureRev): compact writes the probe key, which brings it up to date
// unless that write races another too, and tries again. It returns
// current, or the revision of that write if later: kine compacts to at
// least min(target, that revision − the revisions it keeps).
func (m *maintainer) compact(ctx context.Context, target, current int64) (int64, error) {
	deadline := time.Now().Add(compactCatchUp)
	for {
		_, err := m.client.Compact(ctx, target)
		switch {
		case err == nil, errors.Is(err, rpctypes.ErrCompacted):
			return current, nil
		case !errors.Is(err, rpctypes.ErrFutureRev):
			return 0, fmt.Errorf("compacting to revision %d: %w", target, err)
		case time.Now().After(deadline):
			return 0, fmt.Errorf("compacting to revision %d: kine's revision did not catch up with the database's in %s: %w", target, compactCatchUp, err)
		}
		rev, err := m.touchProbe(ctx)
		if err != nil {
			return 0, fmt.Errorf("compacting to revision %d: %w", target, err)
		}
		current = max(current, rev)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// compactCatchUp bounds how long compact tries to bring kine's revision up
// to the target.
const compactCatchUp = 10 * time.Second

// touchProbe writes the probe key and returns the revision of the write (0
// when another write of it came first). The write is a create or an
// update conditioned on the key's revision, as the API server writes: kine
// answers a plain put of an existing key by an update conditioned on the
// database's revision, which writes nothing unless that key was the last
// written.
func (m *maintainer) touchProbe(ctx context.Context) (int64, error) {
	got, err := m.client.Get(ctx, revisionProbeKey)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", revisionProbeKey, err)
	}
	txn := m.client.Txn(ctx)
	if len(got.Kvs) == 0 {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(revisionProbeKey), "=", 0)).
			Then(clientv3.OpPut(revisionProbeKey, ""))
	} else {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(revisionProbeKey), "=", got.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(revisionProbeKey, "")).Else(clientv3.OpGet(revisionProbeKey))
	}
	resp, err := txn.Commit()
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", revisionProbeKey, err)
	}
	if !resp.Succeeded {
		return 0, nil
	}
	return resp.Header.Revision, nil
}

// compactRevKey is where kube-apiserver's compactor records the revision it
// compacted to, and where the API server's watch caches learn it (kine
// keeps it apart from its own bookkeeping).
const compactRevKey = "compact_rev_key"

// publishCompaction records rev as the compacted revision the way
// kube-apiserver's compactor does, so that the watch caches stop serving
// watches from before it (410 Gone, as the datastore answers) instead of
// serving them from their own history. rev is a lower bound of what kine
// compacted to: it keeps its last minRetain revisions.
func (m *maintainer) publishCompaction(ctx context.Context, rev int64) error {
	if rev <= 0 {
		return nil
	}
	got, err := m.client.Get(ctx, compactRevKey)
	if err != nil {
		return fmt.Errorf("reading the published compaction: %w", err)
	}
	var version int64
	if len(got.Kvs) > 0 {
		version = got.Kvs[0].Version
		if published, err := strconv.ParseInt(string(got.Kvs[0].Value), 10, 64); err == nil && published >= rev {
			return nil
		}
	}
	// kine recognizes this exact transaction as kube-apiserver's.
	resp, err := m.client.Txn(ctx).If(clientv3.Compare(clientv3.Version(compactRevKey), "=", version)).
		Then(clientv3.OpPut(compactRevKey, strconv.FormatInt(rev, 10))).
		Else(clientv3.OpGet(compactRevKey)).Commit()
	if err != nil {
		return fmt.Errorf("publishing compaction to revision %d: %w", rev, err)
	}
	if !resp.Succeeded {
		// Another server published at the same time; the next round
		// publishes again if it fell short.
		klog.FromContext(ctx).V(2).Info("another server published a compaction first", "revision", rev)
	}
	return nil
}

// currentRevision reads the datastore's revision. It counts a range, not
// one key: kine answers a read of one missing key with the revision it
// keeps in memory, which can lag the database (see compact), while it
// counts a range in SQL, with the database's revision read in the same
// statement.
func (m *maintainer) currentRevision(ctx context.Context) (int64, error) {
	resp, err := m.client.Get(ctx, revisionProbeKey, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("reading the current revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// checkWAL truncates the log when it has grown past m.walLimit.
func (m *maintainer) checkWAL(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sizes, err := m.file.sizes()
	if err != nil || sizes.WAL <= m.walLimit {
		return err
	}
	start := time.Now()
	busy, err := m.file.checkpoint(ctx)
	if err != nil {
		return err
	}
	if took := time.Since(start); took > slowRound {
		klog.FromContext(ctx).Info("datastore log checkpoint was slow; writes wait while it holds the database", "took", took, "walBytes", sizes.WAL, "busy", busy)
	}
	if busy {
		klog.FromContext(ctx).Info("datastore log is over its limit and readers kept it from being truncated; trying again", "walBytes", sizes.WAL, "limit", m.walLimit, "in", walCheckInterval)
	}
	return nil
}

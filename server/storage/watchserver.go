// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/k3s-io/kine/pkg/server"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"
)

// watchServer is the etcd watch API of the in-process client on SQLite,
// served from the demultiplexer (demuxLog), which hands each watch only
// the events of its key range. kine's own watch server (which the socket's
// clients still use) hands every watch every event, each in goroutines of
// its own, and filters afterwards: with a watch per resource, every write
// woke every one of them (see demuxLog).
//
// A watch starts as kine's do: it subscribes to the demultiplexer first,
// then reads what came from its start revision up to the current one from
// the log, then hands on the live events after what that read returned.
// Progress markers pass in order with the events, as events of their own
// key, for keptSpacesWatcher to turn into progress notifications.
type watchServer struct {
	etcdserverpb.UnimplementedWatchServer

	// demux is also kine's log, which the watches' first reads read.
	demux *demuxLog
	ids   atomic.Int64
}

var _ etcdserverpb.WatchServer = (*watchServer)(nil)

func newWatchServer(demux *demuxLog) *watchServer {
	return &watchServer{demux: demux}
}

// Watch serves one watch stream until the client ends it.
func (s *watchServer) Watch(ws etcdserverpb.Watch_WatchServer) error {
	st := &watchStream{server: s, ws: ws, watches: map[int64]context.CancelFunc{}}
	defer st.close()
	for {
		req, err := ws.Recv()
		if err != nil {
			return err
		}
		switch {
		case req.GetCreateRequest() != nil:
			st.create(req.GetCreateRequest())
		case req.GetCancelRequest() != nil:
			st.cancel(req.GetCancelRequest().WatchId, nil)
		case req.GetProgressRequest() != nil:
			s.demux.requestProgress()
		}
	}
}

// watchStream is one stream's watches. Sends are serialized (a gRPC
// stream's Send is not safe for concurrent use), and a watch's responses
// go out in order: the created response first, then its events.
type watchStream struct {
	server *watchServer
	ws     etcdserverpb.Watch_WatchServer

	sendMu sync.Mutex

	mu      sync.Mutex
	watches map[int64]context.CancelFunc
	wg      sync.WaitGroup
	closed  bool
}

func (st *watchStream) send(resp *etcdserverpb.WatchResponse) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	return st.ws.Send(resp)
}

// create starts a watch. The created response is sent before create
// returns, so that creates are answered in the order they came, as the
// etcd client expects.
func (st *watchStream) create(r *etcdserverpb.WatchCreateRequest) {
	ctx := st.ws.Context()
	id := st.server.ids.Add(1)
	key, end := string(r.Key), string(r.RangeEnd)
	if key == "\x00" && end == "\x00" {
		key, end = "", ""
	}
	if key == compactRevKey && end == "" {
		// kube-apiserver's compactor watches the compaction it records;
		// kine keeps that record under a key of its own (etcdKV).
		key = kineCompactRevAPIKey
	}
	if r.StartRevision < 0 {
		_ = st.send(&etcdserverpb.WatchResponse{Header: &etcdserverpb.ResponseHeader{}, WatchId: clientv3.InvalidWatchID,
			Created: true, Canceled: true, CancelReason: server.ErrCompacted.Error()})
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		cancel()
		return
	}
	st.watches[id] = cancel
	st.wg.Add(1)
	st.mu.Unlock()

	// Subscribed first, so that nothing between the read and the live
	// events is missed; what both hold is handed on once.
	// Marked when its stream is (queuedWatchClient).
	live := st.server.demux.Watch(wctx, key, end)
	var initial []*server.Event
	var current int64
	var err error
	if r.StartRevision == 0 {
		current, err = st.server.demux.CurrentRevision(wctx)
	} else {
		var batch server.EventBatch
		batch, err = st.server.demux.After(wctx, key, end, r.StartRevision-1, 0)
		initial, current = batch.Events, batch.CurrentRev
	}
	header := &etcdserverpb.ResponseHeader{Revision: current}
	if errors.Is(err, server.ErrCompacted) {
		compact, _ := st.server.demux.CompactRevision(wctx)
		_ = st.send(&etcdserverpb.WatchResponse{Header: header, WatchId: id, Created: true})
		st.finish(id, &etcdserverpb.WatchResponse{Header: header, WatchId: id, Canceled: true,
			CompactRevision: compact, CancelReason: server.ErrCompacted.Error()})
		st.wg.Done()
		return
	}
	if err != nil {
		_ = st.send(&etcdserverpb.WatchResponse{Header: header, WatchId: id, Created: true})
		st.finish(id, &etcdserverpb.WatchResponse{Header: header, WatchId: id, Canceled: true, CancelReason: err.Error()})
		st.wg.Done()
		return
	}
	if err := st.send(&etcdserverpb.WatchResponse{Header: header, WatchId: id, Created: true}); err != nil {
		st.cancel(id, nil)
		st.wg.Done()
		return
	}
	go func() {
		defer st.wg.Done()
		st.run(wctx, id, r, initial, current, live)
	}()
}

// run hands a watch its first read and then its live events, until the
// watch ends.
func (st *watchStream) run(ctx context.Context, id int64, r *etcdserverpb.WatchCreateRequest,
	initial []*server.Event, current int64, live <-chan []*server.Event) {
	last := current // the revision of everything handed on so far
	noPut, noDelete := false, false
	for _, f := range r.Filters {
		switch f {
		case etcdserverpb.WatchCreateRequest_NOPUT:
			noPut = true
		case etcdserverpb.WatchCreateRequest_NODELETE:
			noDelete = true
		}
	}
	convert := func(events []*server.Event, after int64) []*mvccpb.Event {
		var out []*mvccpb.Event
		for _, e := range events {
			if e == nil || e.KV == nil {
				continue
			}
			if isProgressMarker([]byte(e.KV.Key)) {
				// Its revision, or the last one handed on when the first
				// read reached past the demultiplexer: progress never goes
				// back.
				rev := max(e.KV.ModRevision, last)
				if rev == 0 {
					continue // nothing yet to report progress on
				}
				out = append(out, &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(progressMarkerKey), ModRevision: rev, CreateRevision: rev}})
				continue
			}
			if e.KV.ModRevision <= after || e.KV.ModRevision < r.StartRevision {
				continue
			}
			if (e.Delete && noDelete) || (!e.Delete && noPut) {
				continue
			}
			out = append(out, etcdEvent(e, r.PrevKv))
		}
		return out
	}
	if events := convert(initial, 0); len(events) > 0 {
		if err := st.send(&etcdserverpb.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: current}, WatchId: id, Events: events}); err != nil {
			st.cancel(id, nil)
			return
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case batch, ok := <-live:
			if !ok {
				// It fell behind, or the subscription ended: the client
				// starts it again from where it was.
				st.cancel(id, errWatchEnded)
				return
			}
			events := convert(batch, last)
			for _, e := range batch {
				if e != nil && e.KV != nil && !isProgressMarker([]byte(e.KV.Key)) {
					last = max(last, e.KV.ModRevision)
				}
			}
			if len(events) == 0 {
				continue
			}
			rev := events[len(events)-1].Kv.ModRevision
			if err := st.send(&etcdserverpb.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: max(rev, last)}, WatchId: id, Events: events}); err != nil {
				st.cancel(id, nil)
				return
			}
		}
	}
}

// errWatchEnded is the reason given when a watch ends on the server's
// side: it fell behind, or the datastore's subscription ended.
var errWatchEnded = errors.New("watch ended by the datastore; start it again from its last revision")

// cancel ends a watch and tells the client, with err as the reason if any.
func (st *watchStream) cancel(id int64, err error) {
	resp := &etcdserverpb.WatchResponse{Header: &etcdserverpb.ResponseHeader{}, WatchId: id, Canceled: true}
	if err != nil {
		resp.CancelReason = err.Error()
	}
	st.finish(id, resp)
}

// finish removes a watch once and sends resp for it.
func (st *watchStream) finish(id int64, resp *etcdserverpb.WatchResponse) {
	st.mu.Lock()
	cancel, ok := st.watches[id]
	delete(st.watches, id)
	st.mu.Unlock()
	if !ok {
		return
	}
	cancel()
	if err := st.send(resp); err != nil && st.ws.Context().Err() == nil {
		klog.Background().V(4).Info("Sending a watch's end failed", "watchID", id, "err", err)
	}
}

// close ends every watch of the stream and waits for their goroutines.
func (st *watchStream) close() {
	st.mu.Lock()
	st.closed = true
	for id, cancel := range st.watches {
		cancel()
		delete(st.watches, id)
	}
	st.mu.Unlock()
	st.wg.Wait()
}

// etcdEvent is e as etcd's API has it.
func etcdEvent(e *server.Event, prevKV bool) *mvccpb.Event {
	out := &mvccpb.Event{Kv: etcdKV(e.KV)}
	if e.Delete {
		out.Type = mvccpb.DELETE
	}
	if prevKV && !e.Create && e.PrevKV != nil {
		out.PrevKv = etcdKV(e.PrevKV)
	}
	return out
}

// etcdKV is kv as etcd's API has it. The compaction kube-apiserver's
// compactor records is kine's record of it turned back into the key,
// value and version the compactor wrote, as kine's own watches give it.
func etcdKV(kv *server.KeyValue) *mvccpb.KeyValue {
	if kv == nil {
		return nil
	}
	out := &mvccpb.KeyValue{Key: []byte(kv.Key), Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Lease: kv.Lease}
	if kv.Key == kineCompactRevAPIKey {
		out.Key = []byte(compactRevKey)
		out.Version, out.Value = server.DecodeVersion(kv.Value)
	}
	return out
}

// kineCompactRevAPIKey is where kine keeps the compaction kube-apiserver's
// compactor records under compactRevKey (kine's own bookkeeping has that
// key).
const kineCompactRevAPIKey = "compact_rev_key_apiserver"

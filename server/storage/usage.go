// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Usage counts, for each space asked about, how many objects it stores
// and how many bytes they take in the datastore, for the spaces' limits.
//
// A space is counted the first time it is asked about: one read of each of
// its resources' key ranges, at one revision. From then on one watch of
// every key the API server stores keeps the counts, each event applied to
// the space its key names if it came after that read. Every server of a
// cluster watches the same datastore, so every server counts the same.
//
// Admission reserves what a write it admitted will add (Admit), until the
// watch brings the write's event or reserveFor passes (the write failed):
// writes admitted one after another see each other at once, not when the
// watch catches up.
type Usage struct {
	// Resources returns the resources a space may store objects of, or
	// an error while they cannot be known yet (the CRD cache not synced).
	Resources func(space string) ([]schema.GroupResource, error)

	client *clientv3.Client

	mu sync.Mutex
	// watching is closed while the watch is running and counts are kept.
	watching chan struct{}
	spaces   map[string]*spaceUsage
	now      func() time.Time
}

// reserveFor is how long a reservation lasts at most: a write admitted
// and never stored (refused by the storage, or failed) holds its place for
// this long.
const reserveFor = 10 * time.Second

// usagePage is how many keys one read of a space's resource takes: a
// space the limits do not bound (an admin's) may hold large objects.
const usagePage = 100

// watchWait is how long a question waits for the datastore's watch to be
// running (it starts with the server, and again after it ended) before it
// is answered with an error: a write is refused with 503, not held.
const watchWait = 5 * time.Second

type spaceUsage struct {
	// counted is closed once the first read is done; err is its failure.
	counted chan struct{}
	err     error
	// rev is the revision of the first read: later events count.
	rev int64
	// held are the events that came before the first read was done.
	held           []*clientv3.Event
	objects, bytes int64
	reserved       map[string]reservation
}

type reservation struct {
	objects, bytes int64
	until          time.Time
}

// NewUsage returns a Usage that counts the resources of each space
// resources names, once Run has started.
func NewUsage(resources func(space string) ([]schema.GroupResource, error)) *Usage {
	return &Usage{Resources: resources, spaces: map[string]*spaceUsage{}, watching: make(chan struct{}), now: time.Now}
}

// Run keeps the counts until ctx is done, with a watch of every key of the
// datastore's that it starts again (forgetting every count) should it end.
func (u *Usage) Run(ctx context.Context, client *clientv3.Client) {
	logger := klog.FromContext(ctx).WithName("usage")
	u.mu.Lock()
	u.client = client
	u.mu.Unlock()
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 8, Cap: 10 * time.Second}
	for ctx.Err() == nil {
		err := u.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		logger.Info("Counting spaces' usage again: the datastore's watch ended", "err", err)
		u.forget()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff.Step()):
		}
	}
}

// forget drops every count, and makes Usage wait for the next watch.
func (u *Usage) forget() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.watching:
		u.watching = make(chan struct{})
	default:
	}
	u.spaces = map[string]*spaceUsage{}
}

func (u *Usage) watch(ctx context.Context) error {
	// The revision to start from: a read of one key that is never there.
	resp, err := u.client.Get(ctx, KeyPrefix+"/kubestellar.io/usage-start")
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := u.client.Watch(wctx, KeyPrefix+"/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithPrevKV())
	u.mu.Lock()
	close(u.watching)
	u.mu.Unlock()
	for r := range events {
		if err := r.Err(); err != nil {
			return err
		}
		u.mu.Lock()
		for _, ev := range r.Events {
			u.apply(ev)
		}
		u.mu.Unlock()
	}
	return errors.New("the watch was closed")
}

// SpaceOfKey returns the space of a key the API server stores for a
// space: /registry/GROUP/RESOURCE/SPACE/...
func SpaceOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, KeyPrefix+"/")
	if !ok {
		return "", false
	}
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) < 4 {
		return "", false
	}
	return parts[2], true
}

// apply counts ev in its space, if that space is counted.
func (u *Usage) apply(ev *clientv3.Event) {
	if ev.Kv == nil {
		return
	}
	space, ok := SpaceOfKey(string(ev.Kv.Key))
	if !ok {
		return
	}
	s := u.spaces[space]
	if s == nil {
		return
	}
	select {
	case <-s.counted:
	default:
		s.held = append(s.held, ev)
		return
	}
	if s.err != nil || ev.Kv.ModRevision <= s.rev {
		return
	}
	delete(s.reserved, string(ev.Kv.Key))
	var before int
	if ev.PrevKv != nil {
		before = len(ev.PrevKv.Value)
	}
	switch {
	case ev.Type == mvccpb.DELETE:
		if ev.PrevKv == nil {
			before = len(ev.Kv.Value)
		}
		s.objects--
		s.bytes -= int64(before)
	case ev.IsCreate():
		s.objects++
		s.bytes += int64(len(ev.Kv.Value))
	case ev.PrevKv == nil:
		// An update whose size before is unknown: count the space again.
		delete(u.spaces, space)
	default:
		s.bytes += int64(len(ev.Kv.Value) - before)
	}
}

// Of returns how many objects space stores and how many bytes they take,
// with what admitted writes reserved. It counts the space first if it has
// not yet.
func (u *Usage) Of(ctx context.Context, space string) (objects, bytes int64, err error) {
	s, err := u.counted(ctx, space)
	if err != nil {
		return 0, 0, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	objects, bytes = u.total(s)
	return objects, bytes, nil
}

// Admit decides, in one step with what other writes reserve, whether a
// write of key that adds objects and bytes to space fits under limits
// (0: none); if so, it reserves them (unless dryRun). It returns what the
// space holds, reservations included, for the refusal's message.
func (u *Usage) Admit(ctx context.Context, space, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (storedObjects, storedBytes int64, ok bool, err error) {
	s, err := u.counted(ctx, space)
	if err != nil {
		return 0, 0, false, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	storedObjects, storedBytes = u.total(s)
	if (objects > 0 && maxObjects != 0 && storedObjects+objects > maxObjects) || (bytes > 0 && maxBytes != 0 && storedBytes+bytes > maxBytes) {
		return storedObjects, storedBytes, false, nil
	}
	if !dryRun && key != "" && u.spaces[space] == s {
		u.reserve(s, key, objects, bytes)
	}
	return storedObjects, storedBytes, true, nil
}

// total is what s holds with its reservations that have not expired.
// u.mu is held.
func (u *Usage) total(s *spaceUsage) (objects, bytes int64) {
	objects, bytes = s.objects, s.bytes
	now := u.now()
	for key, r := range s.reserved {
		if now.After(r.until) {
			delete(s.reserved, key)
			continue
		}
		objects += r.objects
		bytes += r.bytes
	}
	return objects, bytes
}

// reserve counts in s, until the watch brings the write of key (or for
// reserveFor), what a write admitted there adds. u.mu is held.
func (u *Usage) reserve(s *spaceUsage, key string, objects, bytes int64) {
	if s.reserved == nil {
		s.reserved = map[string]reservation{}
	}
	r := s.reserved[key]
	r.objects += objects
	r.bytes += bytes
	r.until = u.now().Add(reserveFor)
	s.reserved[key] = r
}

// counted returns the count of space, made first if there is none.
func (u *Usage) counted(ctx context.Context, space string) (*spaceUsage, error) {
	wait, cancel := context.WithTimeout(ctx, watchWait)
	defer cancel()
	for {
		u.mu.Lock()
		watching := u.watching
		u.mu.Unlock()
		select {
		case <-watching:
		case <-wait.Done():
			return nil, errors.New("the count of what spaces store is not running: the datastore's watch is starting again")
		}
		u.mu.Lock()
		if u.watching != watching {
			// The watch ended meanwhile (forget): a count made now
			// would miss what happens before the next one starts.
			u.mu.Unlock()
			continue
		}
		s, found := u.spaces[space]
		if !found {
			s = &spaceUsage{counted: make(chan struct{})}
			u.spaces[space] = s
		}
		client := u.client
		u.mu.Unlock()
		if !found {
			u.count(ctx, client, space, s)
		}
		select {
		case <-s.counted:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.err != nil {
			return nil, s.err
		}
		return s, nil
	}
}

// count reads every key of space at one revision, then applies the
// events the watch held meanwhile. A failed count is forgotten, so that
// the next question tries again.
func (u *Usage) count(ctx context.Context, client *clientv3.Client, space string, s *spaceUsage) {
	objects, bytes, rev, err := u.read(ctx, client, space)
	u.firstCount(space, s, objects, bytes, rev, err)
}

// firstCount records the first count of space, read at rev, and applies the
// events held meanwhile.
func (u *Usage) firstCount(space string, s *spaceUsage, objects, bytes, rev int64, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s.objects, s.bytes, s.rev, s.err = objects, bytes, rev, err
	held := s.held
	s.held = nil
	close(s.counted)
	if err != nil {
		if u.spaces[space] == s {
			delete(u.spaces, space)
		}
		return
	}
	for _, ev := range held {
		u.apply(ev)
	}
}

func (u *Usage) read(ctx context.Context, client *clientv3.Client, space string) (objects, bytes, rev int64, err error) {
	resources, err := u.Resources(space)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, gr := range resources {
		prefix := KeyPrefix + ResourcePrefix(gr) + "/" + space + "/"
		end := clientv3.GetPrefixRangeEnd(prefix)
		for start := prefix; ; {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(usagePage)}
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			resp, err := client.Get(ctx, start, opts...)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("counting %s in space %q: %w", gr, space, err)
			}
			if rev == 0 {
				rev = resp.Header.Revision
			}
			for _, kv := range resp.Kvs {
				objects++
				bytes += int64(len(kv.Value))
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	if rev == 0 {
		resp, err := client.Get(ctx, KeyPrefix+"/kubestellar.io/usage-start")
		if err != nil {
			return 0, 0, 0, err
		}
		rev = resp.Header.Revision
	}
	return objects, bytes, rev, nil
}

// Key returns the key under which the API server stores an object of gr
// in space (namespace is "" for a cluster-scoped one).
func Key(gr schema.GroupResource, space, namespace, name string) string {
	if namespace == "" {
		return KeyPrefix + ResourcePrefix(gr) + "/" + space + "/" + name
	}
	return KeyPrefix + ResourcePrefix(gr) + "/" + space + "/" + namespace + "/" + name
}

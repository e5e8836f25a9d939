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

	lru "github.com/hashicorp/golang-lru/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/spaces"
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
//
// The mailboxes of an inventory space's SyncTargets are counted together
// (OfMailboxes, AdmitMailbox), once mailboxes are: the watch brings their
// events only from the first such question on (MailboxEvents), as most
// servers never ask it and a fan-out's every copy would cross to it.
type Usage struct {
	// Resources returns the resources a space may store objects of, or
	// an error while they cannot be known yet (the CRD cache not synced).
	Resources func(space string) ([]schema.GroupResource, error)
	// InventoryOf returns the inventory space of a mailbox space; false
	// for one it does not know (nil: mailboxes are not counted).
	InventoryOf func(mailbox string) (string, bool)
	// MailboxResources returns the resources the mailboxes of an
	// inventory space may hold objects of.
	MailboxResources func(inventory string) ([]schema.GroupResource, error)
	// MailboxEvents, when set, is called before mailboxes are first
	// counted, to have the watch bring their events from then on.
	MailboxEvents func()
	// PerResource names resources whose objects are also counted apart in
	// each space (OfResource, AdmitResource), by a name of its own.
	PerResource map[string]schema.GroupResource

	client *clientv3.Client

	mu sync.Mutex
	// watching is closed while the watch is running and counts are kept.
	watching chan struct{}
	spaces   map[string]*spaceUsage
	now      func() time.Time
	// inventories remembers the inventory of each mailbox seen: a
	// mailbox's Space may leave the cache before the watch brings the
	// deletes of its objects, which must still count where their creates
	// did. (A mailbox's name is never another inventory's: it ends with
	// its SyncTarget's UID.)
	inventories *lru.Cache[string, string]
	// resourcePrefixes are where PerResource's resources are stored, by
	// name, made at the first event.
	resourcePrefixes map[string]string
}

// mailboxesRemembered is how many mailboxes' inventories Usage remembers.
const mailboxesRemembered = 1 << 16

// recountAfter is how long the count of an inventory's mailboxes is kept
// before it is read again from the datastore: should an event ever be
// missed (a mailbox forgotten between its create and its deletes), the
// count heals.
const recountAfter = 10 * time.Minute

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
	// at is when the first read was asked for.
	at time.Time
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
	inventories, _ := lru.New[string, string](mailboxesRemembered)
	return &Usage{Resources: resources, spaces: map[string]*spaceUsage{}, watching: make(chan struct{}), now: time.Now, inventories: inventories}
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

// mailboxesSuffix ends the name under which the mailboxes of an inventory
// space are counted: space names have no "/".
const mailboxesSuffix = "/mailboxes"

// accountOf returns the name under which a space is counted: its own, or
// its inventory's for a mailbox; false for a mailbox of no known inventory.
func (u *Usage) accountOf(space string) (string, bool) {
	if !spaces.IsMailboxName(space) {
		return space, true
	}
	if u.InventoryOf == nil {
		return "", false
	}
	if inventory, ok := u.inventories.Get(space); ok {
		return inventory + mailboxesSuffix, true
	}
	inventory, ok := u.InventoryOf(space)
	if !ok {
		return "", false
	}
	u.inventories.Add(space, inventory)
	return inventory + mailboxesSuffix, true
}

// apply counts ev in its space, if that space is counted, and apart for
// its resource if PerResource names it.
func (u *Usage) apply(ev *clientv3.Event) {
	if ev.Kv == nil {
		return
	}
	key := string(ev.Kv.Key)
	space, ok := SpaceOfKey(key)
	if !ok {
		return
	}
	if account, ok := u.accountOf(space); ok {
		u.applyTo(account, ev)
	}
	if u.resourcePrefixes == nil && len(u.PerResource) > 0 {
		u.resourcePrefixes = map[string]string{}
		for name, gr := range u.PerResource {
			u.resourcePrefixes[name] = KeyPrefix + ResourcePrefix(gr) + "/"
		}
	}
	for name, prefix := range u.resourcePrefixes {
		if rest, ok := strings.CutPrefix(key, prefix); ok && strings.HasPrefix(rest, space+"/") {
			u.applyTo(space+"/"+name, ev)
		}
	}
}

// applyTo counts ev in an account, if it is counted.
func (u *Usage) applyTo(space string, ev *clientv3.Event) {
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

// Retain forgets the counts of the spaces keep says are gone (deleted
// spaces would otherwise keep theirs for as long as the server runs); a
// space asked about again is counted again.
func (u *Usage) Retain(keep func(space string) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for account := range u.spaces {
		space, _, _ := strings.Cut(account, "/")
		if !keep(space) {
			delete(u.spaces, account)
		}
	}
}

// OfResource is Of for the objects of one resource PerResource names.
func (u *Usage) OfResource(ctx context.Context, space, resource string) (objects, bytes int64, err error) {
	if _, ok := u.PerResource[resource]; !ok {
		return 0, 0, fmt.Errorf("%s are not counted apart", resource)
	}
	return u.Of(ctx, space+"/"+resource)
}

// AdmitResource is Admit for the objects of one resource PerResource
// names.
func (u *Usage) AdmitResource(ctx context.Context, space, resource, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (storedObjects, storedBytes int64, ok bool, err error) {
	if _, ok := u.PerResource[resource]; !ok {
		return 0, 0, false, fmt.Errorf("%s are not counted apart", resource)
	}
	return u.Admit(ctx, space+"/"+resource, key, objects, bytes, maxObjects, maxBytes, dryRun)
}

// OfMailboxes is Of for the mailboxes of an inventory space's SyncTargets,
// all together.
func (u *Usage) OfMailboxes(ctx context.Context, inventory string) (objects, bytes int64, err error) {
	return u.Of(ctx, inventory+mailboxesSuffix)
}

// AdmitMailbox is Admit for the mailboxes of an inventory space's
// SyncTargets, all together; key is in one of them.
func (u *Usage) AdmitMailbox(ctx context.Context, inventory, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (storedObjects, storedBytes int64, ok bool, err error) {
	return u.Admit(ctx, inventory+mailboxesSuffix, key, objects, bytes, maxObjects, maxBytes, dryRun)
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
		if found && strings.HasSuffix(space, mailboxesSuffix) && u.now().Sub(s.at) > recountAfter {
			select {
			case <-s.counted:
				found = false // read again; the old count is left to its readers
			default:
			}
		}
		if !found {
			if strings.HasSuffix(space, mailboxesSuffix) {
				if u.InventoryOf == nil {
					u.mu.Unlock()
					return nil, errors.New("mailboxes are not counted")
				}
				if u.MailboxEvents != nil {
					// Before the first read: every event after it must come.
					u.MailboxEvents()
				}
			}
			s = &spaceUsage{counted: make(chan struct{}), at: u.now()}
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

// read counts what an account holds at one revision: a space's keys, or
// those of an inventory's mailboxes, whose names all begin alike
// (spaces.MailboxName) and so whose keys of each resource are one range.
func (u *Usage) read(ctx context.Context, client *clientv3.Client, space string) (objects, bytes, rev int64, err error) {
	resources := u.Resources
	spacePrefix := space + "/"
	var member func(key string) bool
	if of, name, ok := strings.Cut(space, "/"); ok && name != strings.TrimPrefix(mailboxesSuffix, "/") {
		gr := u.PerResource[name]
		resources = func(string) ([]schema.GroupResource, error) { return []schema.GroupResource{gr}, nil }
		spacePrefix, space = of+"/", of
	} else if inventory, ok := strings.CutSuffix(space, mailboxesSuffix); ok {
		account := space
		resources = u.MailboxResources
		spacePrefix = mailboxPrefix(inventory)
		member = func(key string) bool {
			s, ok := SpaceOfKey(key)
			if !ok {
				return false
			}
			of, ok := u.accountOf(s)
			return ok && of == account
		}
		space = inventory
	}
	grs, err := resources(space)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, gr := range grs {
		prefix := KeyPrefix + ResourcePrefix(gr) + "/" + spacePrefix
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
				if member != nil && !member(string(kv.Key)) {
					continue
				}
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

// mailboxPrefix is how the names of an inventory space's mailboxes begin.
func mailboxPrefix(inventory string) string {
	const uid = "00000000-0000-0000-0000-000000000000"
	return strings.TrimSuffix(spaces.MailboxName(inventory, uid), uid)
}

// Key returns the key under which the API server stores an object of gr
// in space (namespace is "" for a cluster-scoped one).
func Key(gr schema.GroupResource, space, namespace, name string) string {
	if namespace == "" {
		return KeyPrefix + ResourcePrefix(gr) + "/" + space + "/" + name
	}
	return KeyPrefix + ResourcePrefix(gr) + "/" + space + "/" + namespace + "/" + name
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package quota bounds what one space holds: the objects it stores, the
// bytes they take in the datastore, and the watches its users hold open.
// The server's admins set the bounds with SpaceQuota objects in the root
// space, over defaults from the server's flags; admission refuses a write
// past them (403), and WithWatchLimits a watch past them (429), naming
// the limit and where it was set.
//
// The bounds hold for the users of tenant spaces (generic, wds and
// inventory spaces). The server, its admins and syncers are not bounded
// here: the server writes what its controllers need, and syncers are
// bounded per identity (server/auth's SyncerLimits) and per mailbox
// (--mailbox-object-limit).
//
// The copies a placement makes are bounded where they multiply: the
// mailbox limits of an inventory space a user created bound what the
// mailboxes of its SyncTargets hold together, the server's copies
// included (a tenant with 1,000 SyncTargets would otherwise turn 8 MiB of
// workload into 8 GiB of copies). A copy past them is refused to the
// placement translator, which shows it on the EdgePlacement; syncers'
// writes count but pass. The admins' own inventories are not bounded so.
package quota

import (
	"fmt"
	"slices"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/resource"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// The flags that set Defaults.
const (
	ObjectLimitFlag = "--space-object-limit"
	ByteLimitFlag   = "--space-byte-limit"
	WatchLimitFlag  = "--space-watch-limit"

	SyncTargetLimitFlag    = "--space-synctarget-limit"
	MailboxObjectLimitFlag = "--space-mailbox-object-limit"
	MailboxByteLimitFlag   = "--space-mailbox-byte-limit"
)

// Defaults are the limits of a space that no SpaceQuota sets; 0 is no
// bound.
type Defaults struct {
	Objects, Bytes, Watches      int64
	SyncTargets                  int64
	MailboxObjects, MailboxBytes int64
}

// DefaultLimits are sized so that a 2-core server with 24 GiB survives
// 1,000 tenants each at its limits (docs/concepts/tenancy.md#limits-on-tenants
// has the arithmetic, and make bench's flood section the measure).
// A SyncTarget costs the server a mailbox space (as much memory as a
// space): an inventory holds 100. The mailbox limits hold an inventory
// space's copies to four times what a space may store itself: a full WDS
// placed on four edges, or 2 MiB of it on sixteen. A fleet's operator gets
// more from a SpaceQuota.
var DefaultLimits = Defaults{Objects: 1000, Bytes: 8 << 20, Watches: 100, SyncTargets: 100, MailboxObjects: 10000, MailboxBytes: 32 << 20}

// Limit is one bound and where it was set, for the messages that name it.
type Limit struct {
	// Value is the bound; 0 is none.
	Value int64
	// Source names where it was set: a flag, or a SpaceQuota's field.
	Source string
}

func (l Limit) String() string {
	if l.Value == 0 {
		return "no limit"
	}
	return fmt.Sprintf("%d, set by %s", l.Value, l.Source)
}

// Limits are a space's bounds.
type Limits struct {
	Objects, Bytes, Watches      Limit
	SyncTargets                  Limit
	MailboxObjects, MailboxBytes Limit
}

// None reports whether no limit is set.
func (l Limits) None() bool {
	return l.Objects.Value == 0 && l.Bytes.Value == 0 && l.Watches.Value == 0 && l.SyncTargets.Value == 0 && !l.Mailboxes()
}

// Mailboxes reports whether a mailbox limit is set.
func (l Limits) Mailboxes() bool {
	return l.MailboxObjects.Value != 0 || l.MailboxBytes.Value != 0
}

// Resolver tells each space its limits, from the SpaceQuotas in the root
// space and Defaults.
type Resolver struct {
	Defaults Defaults
	quotas   atomic.Pointer[func() ([]*tenancyv1alpha1.SpaceQuota, error)]
}

// SetQuotas sets how to list the SpaceQuotas, once their cache has synced.
func (r *Resolver) SetQuotas(list func() ([]*tenancyv1alpha1.SpaceQuota, error)) {
	r.quotas.Store(&list)
}

// For returns the limits of space. For each limit, a SpaceQuota that names
// space decides; failing that, one that names no space; failing that, the
// default. Where several decide at one level, the least bound holds (0,
// no bound, only when all of them say 0).
func (r *Resolver) For(space string) (Limits, error) {
	out := Limits{
		Objects: Limit{r.Defaults.Objects, "the server's " + ObjectLimitFlag},
		Bytes:   Limit{r.Defaults.Bytes, "the server's " + ByteLimitFlag},
		Watches: Limit{r.Defaults.Watches, "the server's " + WatchLimitFlag},

		SyncTargets:    Limit{r.Defaults.SyncTargets, "the server's " + SyncTargetLimitFlag},
		MailboxObjects: Limit{r.Defaults.MailboxObjects, "the server's " + MailboxObjectLimitFlag},
		MailboxBytes:   Limit{r.Defaults.MailboxBytes, "the server's " + MailboxByteLimitFlag},
	}
	list := r.quotas.Load()
	if list == nil {
		return out, nil
	}
	quotas, err := (*list)()
	if err != nil {
		return Limits{}, err
	}
	var named, general []*tenancyv1alpha1.SpaceQuota
	for _, q := range quotas {
		switch {
		case slices.Contains(q.Spec.Spaces, space):
			named = append(named, q)
		case len(q.Spec.Spaces) == 0:
			general = append(general, q)
		}
	}
	pick := func(def Limit, field string, value func(tenancyv1alpha1.SpaceLimits) *int64) Limit {
		for _, level := range [][]*tenancyv1alpha1.SpaceQuota{named, general} {
			var got *Limit
			for _, q := range level {
				v := value(q.Spec.Limits)
				if v == nil {
					continue
				}
				l := Limit{*v, fmt.Sprintf("SpaceQuota %q spec.limits.%s", q.Name, field)}
				if got == nil || (l.Value != 0 && (got.Value == 0 || l.Value < got.Value)) {
					got = &l
				}
			}
			if got != nil {
				return *got
			}
		}
		return def
	}
	out.Objects = pick(out.Objects, "objects", func(l tenancyv1alpha1.SpaceLimits) *int64 { return l.Objects })
	out.Watches = pick(out.Watches, "watches", func(l tenancyv1alpha1.SpaceLimits) *int64 { return l.Watches })
	out.Bytes = pick(out.Bytes, "bytes", func(l tenancyv1alpha1.SpaceLimits) *int64 { return quantity(l.Bytes) })
	out.SyncTargets = pick(out.SyncTargets, "syncTargets", func(l tenancyv1alpha1.SpaceLimits) *int64 { return l.SyncTargets })
	out.MailboxObjects = pick(out.MailboxObjects, "mailboxObjects", func(l tenancyv1alpha1.SpaceLimits) *int64 { return l.MailboxObjects })
	out.MailboxBytes = pick(out.MailboxBytes, "mailboxBytes", func(l tenancyv1alpha1.SpaceLimits) *int64 { return quantity(l.MailboxBytes) })
	return out, nil
}

func quantity(q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	v := q.Value()
	return &v
}

// Status is limits as a Space's status shows them.
func (l Limits) Status() *tenancyv1alpha1.SpaceLimits {
	objects, watches := l.Objects.Value, l.Watches.Value
	bytes := resourceQuantity(l.Bytes.Value)
	out := &tenancyv1alpha1.SpaceLimits{Objects: &objects, Bytes: &bytes, Watches: &watches}
	if l.SyncTargets.Value != 0 {
		syncTargets := l.SyncTargets.Value
		out.SyncTargets = &syncTargets
	}
	if l.Mailboxes() {
		mailboxObjects, mailboxBytes := l.MailboxObjects.Value, resourceQuantity(l.MailboxBytes.Value)
		out.MailboxObjects, out.MailboxBytes = &mailboxObjects, &mailboxBytes
	}
	return out
}

func resourceQuantity(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.BinarySI) }

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

// ownWriteLifetime is how long an update of a copy waits for its event
// before it is forgotten (the event went to a cache that listed again).
const ownWriteLifetime = time.Minute

// ownWrites are the copies the translator is updating, or updated and
// whose events have not come yet, with the content hash written. The
// event of its own update has nothing new for the mailbox (the reconcile
// that wrote it knew all of it), and with one update of a WDS object
// placed on every edge it was a second reconcile of every mailbox.
// Only updates are kept: the creation of a copy is known as the
// translator's own by its being an Add. What it holds are the writes
// in flight, not the copies.
type ownWrites struct {
	mu    sync.Mutex
	now   func() time.Time
	m     map[ownWrite]ownWritten
	swept time.Time
}

type ownWrite struct {
	gvr schema.GroupVersionResource
	key string // spaces.Key of the copy
}

type ownWritten struct {
	hash string
	at   time.Time
}

func newOwnWrites() *ownWrites {
	return &ownWrites{now: time.Now, m: map[ownWrite]ownWritten{}}
}

// writing records an update of the copy in space about to be made, with
// the content hash it writes: before the write, as the event may come
// before the write returns. forget undoes it when the write fails.
func (o *ownWrites) writing(gvr schema.GroupVersionResource, space, namespace, name, hash string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	o.m[ownWrite{gvr, spaces.Key(space, namespace, name)}] = ownWritten{hash: hash, at: now}
	if now.Sub(o.swept) > ownWriteLifetime {
		o.swept = now
		for k, w := range o.m {
			if now.Sub(w.at) > ownWriteLifetime {
				delete(o.m, k)
			}
		}
	}
}

func (o *ownWrites) forget(gvr schema.GroupVersionResource, space, namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, ownWrite{gvr, spaces.Key(space, namespace, name)})
}

// take reports whether an update event of a copy is of the translator's
// own update (the content hash it wrote), and forgets that write.
func (o *ownWrites) take(gvr schema.GroupVersionResource, m metav1.Object) bool {
	k := ownWrite{gvr, spaces.Key(crossspace.SpaceOf(m), m.GetNamespace(), m.GetName())}
	hash := crossspace.Annotation(m, ContentHashAnnotation)
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[k]
	if !ok || hash == "" || w.hash != hash {
		return false
	}
	delete(o.m, k)
	return true
}

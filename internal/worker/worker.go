// Package worker runs the work loop every controller in kubestellar shares:
// take a key from a rate-limited queue, process it, and requeue or forget it.
package worker

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Work processes keys from a queue until it shuts down. An error requeues
// the key with rate limiting, logged with failure unless quiet says it is
// expected (such as a conflict, when the cache will deliver the newer
// object); requeue asks to look again shortly (a cache not yet synced);
// success forgets the key's failures.
func Work[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], failure string,
	process func(context.Context, K) (requeue bool, err error), quiet func(error) bool) {
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return
		}
		requeue, err := process(ctx, key)
		switch {
		case err != nil:
			if quiet == nil || !quiet(err) {
				klog.FromContext(ctx).Error(err, failure, "key", key)
			}
			queue.AddRateLimited(key)
		case requeue:
			queue.AddAfter(key, 100*time.Millisecond)
		default:
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// Conflicts are expected errors: another writer was first.
func Conflicts(err error) bool { return apierrors.IsConflict(err) }

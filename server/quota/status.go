// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"context"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// StatusWriter shows on each tenant Space's status what the space stores
// (status.usage) and its limits (status.limits), so that a tenant sees
// how close to them it is: kubectl get spaces -o wide.
type StatusWriter struct {
	// Spaces is the cache of Space objects; Client writes them.
	Spaces cache.GenericLister
	Client dynamic.ResourceInterface
	// Usage returns what a space stores; for an inventory space under a
	// mailbox limit, with what its SyncTargets' mailboxes hold.
	Usage  func(ctx context.Context, space string) (tenancyv1alpha1.SpaceUsage, error)
	Limits func(space string) (Limits, error)
	// Governed reports whether the limits hold in space.
	Governed func(space string) bool
	// Every is how often it looks.
	Every time.Duration
}

// Run writes the statuses every w.Every until ctx ends.
func (w *StatusWriter) Run(ctx context.Context, _ int) {
	wait.UntilWithContext(ctx, w.writeAll, w.Every)
}

func (w *StatusWriter) writeAll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	all, err := w.Spaces.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing spaces to show their usage")
		return
	}
	for _, obj := range all {
		if ctx.Err() != nil {
			return
		}
		space, ok := obj.(*unstructured.Unstructured)
		if !ok || space.GetDeletionTimestamp() != nil || !w.Governed(space.GetName()) {
			continue
		}
		if err := w.write(ctx, space); err != nil {
			logger.V(2).Info("Could not show a space's usage; trying again later", "space", space.GetName(), "err", err)
		}
	}
}

// write updates a Space's usage and limits, when the usage changed by an
// object, or by a hundredth of its bytes, or the limits changed: a
// tenant's every update would otherwise rewrite its Space.
func (w *StatusWriter) write(ctx context.Context, space *unstructured.Unstructured) error {
	name := space.GetName()
	usage, err := w.Usage(ctx, name)
	if err != nil {
		return err
	}
	limits, err := w.Limits(name)
	if err != nil {
		return err
	}
	var shown struct {
		Usage  *tenancyv1alpha1.SpaceUsage  `json:"usage"`
		Limits *tenancyv1alpha1.SpaceLimits `json:"limits"`
	}
	if status, ok := space.Object["status"].(map[string]any); ok {
		_ = runtimeConvert(status, &shown)
	}
	want := limits.Status()
	if usage.MailboxObjects == nil {
		// No inventory, or no mailbox limit: none shown.
		want.MailboxObjects, want.MailboxBytes = nil, nil
	}
	if usage.SyncTargets == nil {
		want.SyncTargets = nil
	}
	if shown.Usage != nil && sameUsage(*shown.Usage, usage) && sameLimits(shown.Limits, want) {
		return nil
	}
	// A merge patch: what is not shown any more is set to null.
	limitsPatch, err := nullAbsent(want, "mailboxObjects", "mailboxBytes", "syncTargets")
	if err != nil {
		return err
	}
	usagePatch, err := nullAbsent(usage, "mailboxObjects", "mailboxBytes", "syncTargets")
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"usage": usagePatch, "limits": limitsPatch}})
	if err != nil {
		return err
	}
	_, err = w.Client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubestellar-space-usage"}, "status")
	return err
}

// sameUsage reports whether the usage shown is near enough to now's: the
// same object counts, and bytes within a hundredth.
func sameUsage(shown, now tenancyv1alpha1.SpaceUsage) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	nearPtr := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || near(*x, *y)) }
	return shown.Objects == now.Objects && near(shown.Bytes, now.Bytes) &&
		eq(shown.MailboxObjects, now.MailboxObjects) && nearPtr(shown.MailboxBytes, now.MailboxBytes) && eq(shown.SyncTargets, now.SyncTargets)
}

// nullAbsent is v as a JSON object whose fields named are null where v
// leaves them out.
func nullAbsent(v any, fields ...string) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	for _, f := range fields {
		if _, ok := out[f]; !ok {
			out[f] = nil
		}
	}
	return out, nil
}

// near reports whether a shown byte count is within a hundredth of now.
func near(shown, now int64) bool {
	d := shown - now
	if d < 0 {
		d = -d
	}
	return d*100 <= now
}

func sameLimits(a, b *tenancyv1alpha1.SpaceLimits) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqQ := func(x, y *resource.Quantity) bool { return (x == nil) == (y == nil) && (x == nil || x.Cmp(*y) == 0) }
	return eq(a.Objects, b.Objects) && eq(a.Watches, b.Watches) && eqQ(a.Bytes, b.Bytes) &&
		eq(a.MailboxObjects, b.MailboxObjects) && eqQ(a.MailboxBytes, b.MailboxBytes) && eq(a.SyncTargets, b.SyncTargets)
}

// runtimeConvert reads an unstructured status into out.
func runtimeConvert(in map[string]any, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

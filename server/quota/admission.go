// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/spaces"
)

// Usage is what a space stores, as server/storage's Usage counts it.
type Usage interface {
	// Admit decides, in one step with the other writes it admits, whether
	// a write of key adding objects and bytes to space fits under
	// maxObjects and maxBytes (0: no bound), and if so reserves them
	// until the write is stored (unless dryRun). It returns what the
	// space holds, for the refusal's message.
	Admit(ctx context.Context, space, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (storedObjects, storedBytes int64, ok bool, err error)
	// AdmitResource is Admit for the objects of one resource of space
	// (by its name in server/storage's Usage.PerResource).
	AdmitResource(ctx context.Context, space, resource, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (storedObjects, storedBytes int64, ok bool, err error)
	// AdmitMailbox is Admit for the mailboxes of an inventory space's
	// SyncTargets, all together.
	AdmitMailbox(ctx context.Context, inventory, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (storedObjects, storedBytes int64, ok bool, err error)
}

// Scope tells which spaces and users the limits hold for.
type Scope struct {
	// Governed reports whether space is a tenant's: not root, not a
	// mailbox.
	Governed func(space string) bool
	// MailboxOf returns the inventory space of a mailbox space; false for
	// a space that is no mailbox.
	MailboxOf func(space string) (inventory string, ok bool)
	// Key returns where an object is stored, to match a reservation to its
	// write (server/storage.Key).
	Key func(space string, a admission.Attributes) string
}

// NewAdmission returns the admission plugin that refuses a create past a
// space's object limit, and a create or update past its byte limit; and
// in a mailbox, the same past the mailbox limits of its inventory space.
// A write that does not grow the space (a delete, an update that shrinks
// an object) always passes, so that a space at its limit can make room.
//
// Creates admitted at the same moment on different servers of a cluster
// may each see the space below its limit, and so pass it by as many: each
// server sees the others' writes when the datastore's watch brings them.
func NewAdmission(limits func(space string) (Limits, error), usage Usage, scope Scope) admission.Interface {
	return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update), limits: limits, usage: usage, scope: scope}
}

type plugin struct {
	*admission.Handler
	limits func(string) (Limits, error)
	usage  Usage
	scope  Scope
}

var _ admission.ValidationInterface = &plugin{}

// Bounded reports whether the limits hold for u: a user of a tenant space,
// not the server, an admin or a syncer.
func Bounded(u user.Info) bool {
	if u == nil || provenance.IsPrivileged(u) {
		return false
	}
	_, _, syncer := principal.SyncTargetOf(u)
	return !syncer
}

// syncTargets are bounded apart (Limits.SyncTargets).
var syncTargets = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets").GroupResource()

// unstored are the API groups whose creates store nothing (reviews).
var unstored = map[string]bool{"authorization.k8s.io": true, "authentication.k8s.io": true}

func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	gr := a.GetResource().GroupResource()
	if unstored[gr.Group] || (a.GetOperation() == admission.Create && a.GetSubresource() != "") {
		return nil // a TokenRequest, an eviction: nothing new is stored
	}
	space, ok := spaces.FromContext(ctx)
	if !ok {
		return nil
	}
	if inventory, ok := p.scope.MailboxOf(space); ok {
		return p.validateMailbox(ctx, a, space, inventory)
	}
	if !Bounded(a.GetUserInfo()) || !p.scope.Governed(space) {
		return nil
	}
	limits, err := p.limits(space)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("reading the limits of space %q: %v", space, err))
	}
	if gr == syncTargets && a.GetOperation() == admission.Create && limits.SyncTargets.Value != 0 {
		refused, _, err := charge(a, limits.SyncTargets, Limit{}, func(objects, bytes, maxObjects, maxBytes int64) (int64, int64, bool, error) {
			return p.usage.AdmitResource(ctx, space, gr.Resource, p.scope.Key(space, a), objects, bytes, maxObjects, maxBytes, a.IsDryRun())
		})
		if err != nil {
			return apierrors.NewServiceUnavailable(fmt.Sprintf("counting the SyncTargets of space %q: %v", space, err))
		}
		if refused != "" {
			return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf("space %q holds %s: each SyncTarget has a mailbox space at the center; delete one no longer needed, or ask the server's admin to raise the limit (a SpaceQuota in the root space)",
				space, strings.Replace(refused, "objects", "SyncTargets", 1)))
		}
	}
	refused, _, err := charge(a, limits.Objects, limits.Bytes, func(objects, bytes, maxObjects, maxBytes int64) (int64, int64, bool, error) {
		return p.usage.Admit(ctx, space, p.scope.Key(space, a), objects, bytes, maxObjects, maxBytes, a.IsDryRun())
	})
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("counting what space %q stores: %v", space, err))
	}
	if refused == "" {
		return nil
	}
	return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf("space %q stores %s: delete what the space no longer needs, or ask the server's admin to raise the limit (a SpaceQuota in the root space)", space, refused))
}

// validateMailbox charges a write into a mailbox to the mailbox limits of
// its inventory space. The server's copies are charged (they are what a
// placement multiplies), and so is everyone else's write but the
// mailbox's syncer's, which counts without being refused (its status must
// always reach the center; --mailbox-object-limit bounds what it adds),
// and the server's bookkeeping: what it writes to serve the mailbox at all
// (its namespaces, its SyncerConfig, the CRDs bound to it), which has no
// placement-copy label.
func (p *plugin) validateMailbox(ctx context.Context, a admission.Attributes, mailbox, inventory string) error {
	u := a.GetUserInfo()
	if _, _, syncer := principal.SyncTargetOf(u); syncer || !p.scope.Governed(inventory) || (provenance.IsServer(u) && !placementCopy(a.GetObject())) {
		return nil
	}
	limits, err := p.limits(inventory)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("reading the limits of space %q: %v", inventory, err))
	}
	refused, hit, err := charge(a, limits.MailboxObjects, limits.MailboxBytes, func(objects, bytes, maxObjects, maxBytes int64) (int64, int64, bool, error) {
		return p.usage.AdmitMailbox(ctx, inventory, p.scope.Key(mailbox, a), objects, bytes, maxObjects, maxBytes, a.IsDryRun())
	})
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("counting what the mailboxes of space %q hold: %v", inventory, err))
	}
	if refused == "" {
		return nil
	}
	forbidden := apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
		"the mailboxes of the SyncTargets of inventory space %q hold %s: place less, or on fewer SyncTargets, or ask the server's admin to raise the limit (a SpaceQuota in the root space)", inventory, refused))
	forbidden.ErrStatus.Details.Causes = append(forbidden.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    metav1.CauseType(edgev2alpha1.MailboxLimitReason),
		Message: fmt.Sprintf("the mailboxes of inventory space %q hold what its limit allows (%s): copies past it are not placed", inventory, hit)})
	return forbidden
}

// placementCopy reports whether obj is labeled as a placement's copy.
func placementCopy(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetLabels()[edgev2alpha1.PlacementCopyLabel] == "true"
}

// charge decides whether a write fits under an object and a byte limit
// with admit, which reserves it if so. It returns why not ("" when it
// fits), as what is stored against which limit, and that limit.
func charge(a admission.Attributes, objectLimit, byteLimit Limit,
	admit func(objects, bytes, maxObjects, maxBytes int64) (stored, storedBytes int64, ok bool, err error)) (string, Limit, error) {
	if objectLimit.Value == 0 && byteLimit.Value == 0 {
		return "", Limit{}, nil
	}
	var objects, grows int64
	if a.GetOperation() == admission.Create {
		objects = 1
	}
	if byteLimit.Value != 0 {
		var err error
		if grows, err = growth(a); err != nil {
			return "", Limit{}, err
		}
	}
	if objects == 0 && grows <= 0 {
		return "", Limit{}, nil
	}
	maxObjects, maxBytes := objectLimit.Value, byteLimit.Value
	if objects == 0 {
		maxObjects = 0 // an update adds no object
	}
	if grows <= 0 {
		maxBytes = 0
	}
	stored, storedBytes, ok, err := admit(objects, max(grows, 0), maxObjects, maxBytes)
	if err != nil || ok {
		return "", Limit{}, err
	}
	if maxObjects != 0 && stored+objects > objectLimit.Value {
		return fmt.Sprintf("%d objects, its limit (%s)", stored, objectLimit), objectLimit, nil
	}
	return fmt.Sprintf("%d bytes and this would add %d, past its limit (%s)", storedBytes, grows, byteLimit), byteLimit, nil
}

// growth is how many bytes a write adds to its space, measured as the
// datastore holds it: a built-in kind in protobuf, anything else in JSON.
func growth(a admission.Attributes) (int64, error) {
	n, err := size(a.GetObject())
	if err != nil || a.GetOperation() != admission.Update {
		return n, err
	}
	old, err := size(a.GetOldObject())
	return n - old, err
}

// sizer is what protobuf-generated types (the built-in kinds) have.
type sizer interface{ Size() int }

func size(obj runtime.Object) (int64, error) {
	if obj == nil {
		return 0, nil
	}
	if s, ok := obj.(sizer); ok {
		return int64(s.Size()), nil
	}
	// A custom resource is stored as the JSON its serializer writes, which
	// escapes as json.Marshal does.
	data, err := json.Marshal(obj)
	if err != nil {
		return 0, fmt.Errorf("measuring the object: %w", err)
	}
	return int64(len(data)), nil
}

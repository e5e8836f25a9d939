// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

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
}

// Scope tells which spaces and users the limits hold for.
type Scope struct {
	// Governed reports whether space is a tenant's: not root, not a
	// mailbox.
	Governed func(space string) bool
	// Key returns where an object is stored, to match a reservation to its
	// write (server/storage.Key).
	Key func(space string, a admission.Attributes) string
}

// NewAdmission returns the admission plugin that refuses a create past a
// space's object limit, and a create or update past its byte limit. A
// write that does not grow the space (a delete, an update that shrinks an
// object) always passes, so that a space at its limit can make room.
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

// unstored are the API groups whose creates store nothing (reviews).
var unstored = map[string]bool{"authorization.k8s.io": true, "authentication.k8s.io": true}

func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	gr := a.GetResource().GroupResource()
	if unstored[gr.Group] || (a.GetOperation() == admission.Create && a.GetSubresource() != "") || !Bounded(a.GetUserInfo()) {
		return nil // a TokenRequest, an eviction: nothing new is stored
	}
	space, ok := spaces.FromContext(ctx)
	if !ok || !p.scope.Governed(space) {
		return nil
	}
	limits, err := p.limits(space)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("reading the limits of space %q: %v", space, err))
	}
	if limits.Objects.Value == 0 && limits.Bytes.Value == 0 {
		return nil
	}
	var objects, grows int64
	if a.GetOperation() == admission.Create {
		objects = 1
	}
	if limits.Bytes.Value != 0 {
		if grows, err = growth(a); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	if objects == 0 && grows <= 0 {
		return nil
	}
	maxObjects, maxBytes := limits.Objects.Value, limits.Bytes.Value
	if objects == 0 {
		maxObjects = 0 // an update adds no object
	}
	if grows <= 0 {
		maxBytes = 0
	}
	stored, storedBytes, ok, err := p.usage.Admit(ctx, space, p.scope.Key(space, a), objects, max(grows, 0), maxObjects, maxBytes, a.IsDryRun())
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("counting what space %q stores: %v", space, err))
	}
	if ok {
		return nil
	}
	deny := func(format string, args ...any) error {
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf(format+": delete what the space no longer needs, or ask the server's admin to raise the limit (a SpaceQuota in the root space)", args...))
	}
	if l := limits.Objects; maxObjects != 0 && stored+objects > l.Value {
		return deny("space %q stores %d objects, its limit (%s)", space, stored, l)
	}
	return deny("space %q stores %d bytes and this would add %d, past its limit (%s)", space, storedBytes, grows, limits.Bytes)
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

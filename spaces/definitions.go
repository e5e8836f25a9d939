// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

// With CRDs stored per space, spaces may define one name differently, and
// a read of a custom resource across every space (the wildcard) has no
// one definition to decode the objects by. A read across every space of
// the objects of one definition names it: /spaces/*~ID/..., where ID is
// the definition's identity (DefinitionIdentity). It lists and watches the
// objects of the spaces whose CRD of the name has that identity, and no
// other space's, which are left out by key before anything is decoded.
// Like the wildcard, it is the server's and its admins' alone.

// definitionMark joins the wildcard and a definition's identity.
const definitionMark = "~"

// WildcardOf returns the space name of a read across every space of the
// custom resources of the definition whose identity is id: a client puts
// it in a request's context (WithSpace, through ScopedConfig).
func WildcardOf(id string) string { return Wildcard + definitionMark + id }

// DefinitionOfWildcard returns the identity a space name from WildcardOf
// names, and whether it is one.
func DefinitionOfWildcard(space string) (string, bool) {
	return strings.CutPrefix(space, Wildcard+definitionMark)
}

// validIdentity tells what is wrong with a definition's identity in a
// path, if anything: DefinitionIdentity makes 32 lowercase hex digits.
func validIdentity(id string) error {
	if len(id) != 2*identityBytes || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("invalid definition %q in %s%s: a definition's identity is %d lowercase hex digits", id, PathPrefix, WildcardOf(id), 2*identityBytes)
	}
	return nil
}

type definitionKey struct{}

// WithDefinition returns a context whose request reads, across every
// space (its space is the wildcard), the objects of the definition whose
// identity is id alone. WithSpacePath sets it from a /spaces/*~ID path.
func WithDefinition(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, definitionKey{}, id)
}

// DefinitionFrom returns the identity WithDefinition put in ctx, or "".
func DefinitionFrom(ctx context.Context) string {
	id, _ := ctx.Value(definitionKey{}).(string)
	return id
}

// identityBytes is the length of a definition's identity, in bytes.
const identityBytes = 16

// DefinitionIdentity is the identity of what a CRD defines: its name, its
// spec and its accepted names, which is what the server serves its custom
// resources by. Two spaces whose CRDs of a name have one identity share
// the serving of it, and a read by definition (WildcardOf) reads both. A
// CRD's state (accepted, established, terminating) is not part of it.
func DefinitionIdentity(crd *apiextensionsv1.CustomResourceDefinition) string {
	data, _ := json.Marshal(struct {
		Name          string                                         `json:"name"`
		Spec          *apiextensionsv1.CustomResourceDefinitionSpec  `json:"spec"`
		AcceptedNames *apiextensionsv1.CustomResourceDefinitionNames `json:"acceptedNames"`
	}{crd.Name, &crd.Spec, &crd.Status.AcceptedNames})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:identityBytes])
}

type watchExpiryKey struct{}

type watchExpiry struct {
	expired <-chan struct{}
	message string
}

// WithWatchExpiry returns a context whose watches of a space's storage end
// once expired is closed, with an error event 410 Expired saying message:
// what a reader's reflector takes to list again. A read by definition
// ends so when a space's CRD moves to or from the definition, which
// changes the set of objects the read lists.
func WithWatchExpiry(ctx context.Context, expired <-chan struct{}, message string) context.Context {
	return context.WithValue(ctx, watchExpiryKey{}, watchExpiry{expired: expired, message: message})
}

// expiring returns w, made to end as WithWatchExpiry in ctx says, if it
// does.
func expiring(ctx context.Context, w watch.Interface) watch.Interface {
	e, ok := ctx.Value(watchExpiryKey{}).(watchExpiry)
	if !ok || e.expired == nil {
		return w
	}
	x := &expiringWatch{in: w, out: make(chan watch.Event), done: make(chan struct{})}
	go x.run(e)
	return x
}

// expiringWatch hands on a watch's events until it expires, then an error
// event 410 Expired, and ends.
type expiringWatch struct {
	in   watch.Interface
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func (x *expiringWatch) run(e watchExpiry) {
	defer close(x.out)
	defer x.in.Stop()
	for {
		select {
		case ev, ok := <-x.in.ResultChan():
			if !ok {
				return
			}
			select {
			case x.out <- ev:
			case <-x.done:
				return
			case <-e.expired:
				x.expire(e.message)
				return
			}
		case <-e.expired:
			x.expire(e.message)
			return
		case <-x.done:
			return
		}
	}
}

func (x *expiringWatch) expire(message string) {
	status := apierrors.NewResourceExpired(message).ErrStatus
	select {
	case x.out <- watch.Event{Type: watch.Error, Object: &status}:
	case <-x.done:
	}
}

func (x *expiringWatch) ResultChan() <-chan watch.Event { return x.out }

func (x *expiringWatch) Stop() { x.once.Do(func() { close(x.done) }) }

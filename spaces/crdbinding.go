// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestellar/kubestellar/internal/provenance"
)

// A CRD is one API across the server: the apiextensions server serves one
// definition per group and resource. Spaces share it by binding: a CRD is
// stored once, with the spaces that serve it in BoundAnnotation. Creating a
// CRD in a space binds it there (an identical definition is shared; a
// different one is refused), deleting it unbinds it there only, and the
// last space's delete deletes it. Inside a space, a CRD bound elsewhere
// does not exist: not in get, list and watch, nor in discovery, nor are its
// instances served (WithCRDBindings).
const (
	// BoundAnnotation lists, on a stored CRD, the spaces that serve it,
	// sorted and comma-separated, or AllSpaces. Only the server writes it,
	// and only the server sees it.
	BoundAnnotation = "tenancy.kubestellar.io/bound-spaces"
	// boundBeforeAnnotation is BoundAnnotation before the write that stored
	// the object, so that a watch in one space can tell from one event that
	// the CRD appeared or disappeared there.
	boundBeforeAnnotation = "tenancy.kubestellar.io/bound-spaces-before"
	// AllSpaces binds a CRD to every space: the server's own CRDs, and CRDs
	// stored before CRDs were bound to spaces.
	AllSpaces = "*"
)

var crdResource = apiextensions.Resource("customresourcedefinitions")

// Bindings are the spaces that serve a CRD.
type Bindings struct {
	all   bool
	names []string // sorted, no duplicates
}

// ParseBindings reads the value of BoundAnnotation.
func ParseBindings(value string) Bindings {
	if value == AllSpaces {
		return Bindings{all: true}
	}
	var names []string
	for _, n := range strings.Split(value, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return Bindings{names: slices.Compact(names)}
}

// BindingsOf returns the bindings recorded in a CRD's annotations. A CRD
// without any (stored before bindings existed) is served everywhere, as it
// was then.
func BindingsOf(annotations map[string]string) Bindings {
	value, ok := annotations[BoundAnnotation]
	if !ok {
		return Bindings{all: true}
	}
	return ParseBindings(value)
}

// Has tells whether space serves the CRD.
func (b Bindings) Has(space string) bool {
	_, found := slices.BinarySearch(b.names, space)
	return b.all || found
}

// All tells whether every space serves the CRD.
func (b Bindings) All() bool { return b.all }

// Shared tells whether a space other than one serves the CRD.
func (b Bindings) Shared() bool { return b.all || len(b.names) > 1 }

// Spaces returns the spaces bound, when not all of them.
func (b Bindings) Spaces() []string { return slices.Clone(b.names) }

func (b Bindings) String() string {
	if b.all {
		return AllSpaces
	}
	return strings.Join(b.names, ",")
}

// With returns b with space bound too.
func (b Bindings) With(space string) Bindings {
	if b.Has(space) {
		return b
	}
	names := append(slices.Clone(b.names), space)
	slices.Sort(names)
	return Bindings{names: names}
}

// Without returns b without space. All spaces stay all.
func (b Bindings) Without(space string) Bindings {
	if b.all {
		return b
	}
	return Bindings{names: slices.DeleteFunc(slices.Clone(b.names), func(n string) bool { return n == space })}
}

// ServerView tells whether a request sees every CRD as stored, with its
// bindings: the server's own loopback requests in the root space (the
// apiextensions server's controllers and ours) and lists and watches
// through the wildcard space. Everyone else sees the CRDs of their space.
func ServerView(ctx context.Context) bool {
	space := SpaceOrRoot(ctx)
	if space == Wildcard {
		return true
	}
	if space != Root {
		return false
	}
	u, ok := genericapirequest.UserFrom(ctx)
	return !ok || provenance.IsServer(u)
}

// DecorateCRDs wraps the storage of CRDs so that each space sees and
// changes only its bindings (see BoundAnnotation). serverView tells which
// requests see the CRDs as stored (ServerView).
func DecorateCRDs(s storage.Interface, serverView func(context.Context) bool) storage.Interface {
	return &crdStorage{Interface: s, serverView: serverView}
}

type crdStorage struct {
	storage.Interface
	serverView func(context.Context) bool
}

var _ storage.Interface = &crdStorage{}

func asCRD(obj runtime.Object) (*apiextensions.CustomResourceDefinition, error) {
	crd, ok := obj.(*apiextensions.CustomResourceDefinition)
	if !ok {
		return nil, fmt.Errorf("the CRD storage got %T", obj)
	}
	return crd, nil
}

func setAnnotation(m *metav1.ObjectMeta, key, value string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
}

// strip hides the bindings from a space's view: which other spaces serve a
// CRD is not the space's business.
func strip(crd *apiextensions.CustomResourceDefinition) {
	if crd.Annotations == nil {
		return
	}
	delete(crd.Annotations, BoundAnnotation)
	delete(crd.Annotations, boundBeforeAnnotation)
	if len(crd.Annotations) == 0 {
		crd.Annotations = nil
	}
}

// record stores bindings on crd, with before as what they were.
func record(crd *apiextensions.CustomResourceDefinition, before, now Bindings) {
	setAnnotation(&crd.ObjectMeta, boundBeforeAnnotation, before.String())
	setAnnotation(&crd.ObjectMeta, BoundAnnotation, now.String())
}

func (s *crdStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	crd, err := asCRD(obj)
	if err != nil {
		return err
	}
	if s.serverView(ctx) {
		// The server's own CRDs are served everywhere unless it says otherwise.
		if _, ok := crd.Annotations[BoundAnnotation]; !ok {
			setAnnotation(&crd.ObjectMeta, BoundAnnotation, AllSpaces)
		}
		delete(crd.Annotations, boundBeforeAnnotation)
		return s.Interface.Create(ctx, key, obj, out, ttl)
	}
	space := SpaceOrRoot(ctx)
	strip(crd)
	// Create, or bind what exists; a CRD created or deleted meanwhile
	// changes which, so look again a few times.
	var last error
	for range 3 {
		existing := &apiextensions.CustomResourceDefinition{}
		err := s.Interface.Get(ctx, key, storage.GetOptions{}, existing)
		if storage.IsNotFound(err) {
			fresh := crd.DeepCopy()
			record(fresh, Bindings{}, Bindings{names: []string{space}})
			last = s.Interface.Create(ctx, key, fresh, out, ttl)
			if storage.IsExist(last) {
				continue
			}
			if last == nil {
				if created, err := asCRD(out); err == nil {
					strip(created)
				}
			}
			return last
		}
		if err != nil {
			return err
		}
		last = s.bind(ctx, key, space, crd, existing, out)
		if storage.IsNotFound(last) || storage.IsConflict(last) {
			continue
		}
		return last
	}
	return last
}

// bind binds an existing CRD to space, if its definition is want's.
func (s *crdStorage) bind(ctx context.Context, key, space string, want, existing *apiextensions.CustomResourceDefinition, out runtime.Object) error {
	if err := bindable(key, space, want, existing); err != nil {
		return err
	}
	uid := existing.UID
	err := s.Interface.GuaranteedUpdate(ctx, key, out, false, &storage.Preconditions{UID: &uid},
		func(input runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
			cur, err := asCRD(input)
			if err != nil {
				return nil, nil, err
			}
			if err := bindable(key, space, want, cur); err != nil {
				return nil, nil, err
			}
			cur = cur.DeepCopy()
			b := BindingsOf(cur.Annotations)
			record(cur, b, b.With(space))
			return cur, nil, nil
		}, nil)
	if err != nil {
		return err
	}
	if bound, err := asCRD(out); err == nil {
		strip(bound)
	}
	return nil
}

// bindable tells why an existing CRD cannot be bound to space for want, if
// it cannot.
func bindable(key, space string, want, existing *apiextensions.CustomResourceDefinition) error {
	if BindingsOf(existing.Annotations).Has(space) {
		return storage.NewKeyExistsError(key, 0)
	}
	if existing.DeletionTimestamp != nil {
		return apierrors.NewConflict(crdResource, existing.Name,
			fmt.Errorf("a CRD of this name is being deleted in another space; create it again once that is done"))
	}
	if differ := specDiff(&existing.Spec, &want.Spec); len(differ) > 0 {
		return apierrors.NewConflict(crdResource, existing.Name, fmt.Errorf(
			"another space serves a different definition under this name (it differs in %s). "+
				"A CRD is one API across the server: spaces that create the same CRD share it, and only an identical definition can be shared. "+
				"Create it with the same definition, or define your resource in a group of your own",
			strings.Join(differ, ", ")))
	}
	return nil
}

// specDiff names the fields of two CRD specs that differ.
func specDiff(a, b *apiextensions.CustomResourceDefinitionSpec) []string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	var differ []string
	for i := range va.NumField() {
		if !apiequality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			name := va.Type().Field(i).Name
			differ = append(differ, "spec."+strings.ToLower(name[:1])+name[1:])
		}
	}
	return differ
}

func (s *crdStorage) Get(ctx context.Context, key string, opts storage.GetOptions, objPtr runtime.Object) error {
	if err := s.Interface.Get(ctx, key, opts, objPtr); err != nil || s.serverView(ctx) {
		return err
	}
	crd, err := asCRD(objPtr)
	if err != nil {
		return err
	}
	if crd.Name != "" && !BindingsOf(crd.Annotations).Has(SpaceOrRoot(ctx)) {
		if opts.IgnoreNotFound {
			*crd = apiextensions.CustomResourceDefinition{}
			return nil
		}
		return storage.NewKeyNotFoundError(key, 0)
	}
	strip(crd)
	return nil
}

func (s *crdStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil || s.serverView(ctx) {
		return err
	}
	list, ok := listObj.(*apiextensions.CustomResourceDefinitionList)
	if !ok {
		return fmt.Errorf("the CRD storage got a %T to list into", listObj)
	}
	space := SpaceOrRoot(ctx)
	list.Items = slices.DeleteFunc(list.Items, func(crd apiextensions.CustomResourceDefinition) bool {
		return !BindingsOf(crd.Annotations).Has(space)
	})
	for i := range list.Items {
		strip(&list.Items[i])
	}
	return nil
}

func (s *crdStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil || s.serverView(ctx) {
		return w, err
	}
	space := SpaceOrRoot(ctx)
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return spaceEvent(space, e) }), nil
}

// spaceEvent turns an event on a stored CRD into the event a watch in
// space sees, if any: a binding made is the CRD's ADDED there, an unbinding
// its DELETED.
func spaceEvent(space string, e watch.Event) (watch.Event, bool) {
	crd, ok := e.Object.(*apiextensions.CustomResourceDefinition)
	if !ok || e.Type == watch.Bookmark || e.Type == watch.Error {
		return e, true
	}
	now := BindingsOf(crd.Annotations).Has(space)
	was := now
	if before, ok := crd.Annotations[boundBeforeAnnotation]; ok {
		was = ParseBindings(before).Has(space)
	}
	switch {
	case e.Type == watch.Added && now:
	case e.Type == watch.Deleted && now:
	case e.Type == watch.Modified && was && now:
	case e.Type == watch.Modified && now:
		e.Type = watch.Added
	case e.Type == watch.Modified && was:
		e.Type = watch.Deleted
	default:
		return e, false
	}
	strip(crd)
	return e, true
}

func (s *crdStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	if s.serverView(ctx) {
		// The server changes definitions and status, never bindings.
		keep := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			out, ttl, err := tryUpdate(input, res)
			if err != nil {
				return out, ttl, err
			}
			in, err := asCRD(input)
			if err != nil {
				return nil, nil, err
			}
			crd, err := asCRD(out)
			if err != nil {
				return nil, nil, err
			}
			if bound, ok := in.Annotations[BoundAnnotation]; ok {
				setAnnotation(&crd.ObjectMeta, BoundAnnotation, bound)
				setAnnotation(&crd.ObjectMeta, boundBeforeAnnotation, bound)
			}
			return crd, ttl, nil
		}
		return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, keep, cachedExistingObject)
	}
	space := SpaceOrRoot(ctx)
	unbound := false
	inSpace := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		existing, err := asCRD(input)
		if err != nil {
			return nil, nil, err
		}
		b := BindingsOf(existing.Annotations)
		if existing.Name == "" || !b.Has(space) {
			if existing.Name != "" && !ignoreNotFound {
				return nil, nil, storage.NewKeyNotFoundError(key, 0)
			}
			// A create by update (PUT, server-side apply): in this space
			// there is nothing yet. Store what the writer makes, or bind
			// what another space serves if it is the same.
			out, ttl, err := tryUpdate(&apiextensions.CustomResourceDefinition{}, storage.ResponseMeta{})
			if err != nil {
				return out, ttl, err
			}
			want, err := asCRD(out)
			if err != nil {
				return nil, nil, err
			}
			if existing.Name == "" {
				strip(want)
				record(want, Bindings{}, Bindings{names: []string{space}})
				return want, ttl, nil
			}
			if err := bindable(key, space, want, existing); err != nil {
				return nil, nil, err
			}
			bound := existing.DeepCopy()
			record(bound, b, b.With(space))
			return bound, ttl, nil
		}
		view := existing.DeepCopy()
		strip(view)
		out, ttl, err := tryUpdate(view, res)
		if err != nil {
			return out, ttl, err
		}
		crd, err := asCRD(out)
		if err != nil {
			return nil, nil, err
		}
		deleting := existing.DeletionTimestamp == nil && crd.DeletionTimestamp != nil
		switch {
		case deleting && b.All() && space != Root:
			return nil, nil, apierrors.NewForbidden(crdResource, existing.Name, fmt.Errorf(
				"this CRD is served in every space (installed by the server, or made before CRDs were per space): an admin deletes it in the root space, for every space"))
		case deleting && b.Shared() && !b.All():
			// Other spaces keep it: unbind here, change nothing else.
			kept := existing.DeepCopy()
			record(kept, b, b.Without(space))
			unbound = true
			return kept, ttl, nil
		case b.All() && space != Root && sharedChange(existing, crd):
			return nil, nil, apierrors.NewForbidden(crdResource, existing.Name, fmt.Errorf(
				"this CRD is served in every space (installed by the server, or made before CRDs were per space): an admin changes it in the root space, for every space"))
		case b.Shared() && !b.All() && sharedChange(existing, crd):
			return nil, nil, apierrors.NewConflict(crdResource, existing.Name, fmt.Errorf(
				"other spaces serve this CRD too, so its definition and finalizers cannot change here; "+
					"it can change once a single space serves it"))
		}
		record(crd, b, b)
		return crd, ttl, nil
	}
	// A cached object would be a space's view, without its bindings.
	if err := s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, inSpace, nil); err != nil {
		return err
	}
	crd, err := asCRD(destination)
	if err != nil {
		return err
	}
	strip(crd)
	if unbound {
		// Gone from this space, as a deleted CRD is going.
		now := metav1.Now()
		crd.DeletionTimestamp = &now
	}
	return nil
}

// sharedChange tells whether an update changes what every space that
// shares a CRD relies on: its definition, its finalizers, its deletion.
func sharedChange(old, new *apiextensions.CustomResourceDefinition) bool {
	return len(specDiff(&old.Spec, &new.Spec)) > 0 || !slices.Equal(old.Finalizers, new.Finalizers) ||
		(new.DeletionTimestamp != nil) != (old.DeletionTimestamp != nil)
}

func (s *crdStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	if s.serverView(ctx) {
		return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
	}
	space := SpaceOrRoot(ctx)
	inSpace := func(ctx context.Context, obj runtime.Object) error {
		crd, err := asCRD(obj)
		if err != nil {
			return err
		}
		b := BindingsOf(crd.Annotations)
		if !b.Has(space) {
			return storage.NewKeyNotFoundError(key, 0)
		}
		if b.Shared() && !(b.All() && space == Root) {
			return apierrors.NewConflict(crdResource, crd.Name, fmt.Errorf("other spaces serve this CRD too; delete it again to unbind it from this space"))
		}
		return validateDeletion(ctx, obj)
	}
	// A cached object would be a space's view, without its bindings.
	if err := s.Interface.Delete(ctx, key, out, preconditions, inSpace, nil, opts); err != nil {
		return err
	}
	if crd, err := asCRD(out); err == nil {
		strip(crd)
	}
	return nil
}

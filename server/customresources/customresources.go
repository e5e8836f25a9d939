// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package customresources serves custom resources by definition: each
// request is served by the apiextensions server's own CRD handler for the
// definition its space serves, one handler per definition in use, shared
// by every space whose definition is the same (docs/design/crds.md).
//
// The upstream handler looks a CRD up by name alone, so it cannot tell two
// spaces' definitions of one name apart; made with a cache that holds one
// CRD, the definition, it serves that definition and nothing else, with
// all of upstream's machinery: decoding, validation and CEL, defaulting
// and pruning, conversion, server-side apply, subresources, printer
// columns, metrics.
package customresources

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/tools/cache"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubestellar/kubestellar/spaces"
)

// servedDefinitions counts the definitions served, in the legacy registry
// that the server's /metrics serves: what custom resources cost the
// server grows with it, not with the spaces that share a definition.
var (
	servedDefinitions = k8smetrics.NewGauge(&k8smetrics.GaugeOpts{
		Namespace:      "kubestellar",
		Subsystem:      "custom_resources",
		Name:           "definitions_served",
		Help:           "Custom resource definitions served, each by a handler and storage of its own; spaces whose definitions are the same share one.",
		StabilityLevel: k8smetrics.ALPHA,
	})
	registerMetricsOnce sync.Once
)

// Config is what the upstream handler is made with: the apiextensions
// server's own settings.
type Config struct {
	RESTOptionsGetter   generic.RESTOptionsGetter
	Admission           admission.Interface
	ServiceResolver     webhook.ServiceResolver
	AuthResolverWrapper webhook.AuthenticationInfoResolverWrapper
	Authorizer          authorizer.Authorizer
	RequestTimeout      time.Duration
	MinRequestTimeout   time.Duration
	// StaticOpenAPISpec holds the schemas of the types every custom
	// resource shares (ObjectMeta and the like), for server-side apply.
	StaticOpenAPISpec   map[string]*spec.Schema
	MaxRequestBodyBytes int64
	// OwnRESTOptionsGetter, when set, stores the instances of the
	// definitions Everywhere says are one space's own (or several spaces'
	// that define them equally): it reads the datastore at each request,
	// under the request's space, so that nothing of one definition, no
	// cache nor a conversion, ever decodes an object of another space's.
	OwnRESTOptionsGetter generic.RESTOptionsGetter
	// Everywhere tells whether a CRD is served in every space (the
	// server's own): RESTOptionsGetter, with its watch cache, stores its
	// instances.
	Everywhere func(*apiextensionsv1.CustomResourceDefinition) bool
}

// ErrNotServed is what Definitions.For returns for a resource of a group
// CRDs may define that no CRD defines in the space: the answer is 404, as
// in a cluster without the CRD, whatever another space defines.
var ErrNotServed = errors.New("the server could not find the requested resource")

// Definitions resolves a request to the CRD that defines its resource in
// its space.
type Definitions interface {
	// For returns the CRD that defines group/resource in space, or nil
	// when none does (the request then goes on, to the upstream handler),
	// or ErrNotServed (404 here).
	For(space, group, resource string) (*apiextensionsv1.CustomResourceDefinition, error)
	// InUse calls f with every CRD some space serves now.
	InUse(f func(*apiextensionsv1.CustomResourceDefinition)) error
}

// Readers is what Definitions that serve reads by definition (a space
// named by spaces.WildcardOf, which For resolves) implement.
type Readers interface {
	// Spaces says which spaces a read of the definition id of name
	// keeps, asked for each object as it is read.
	Spaces(name, id string) func(space string) bool
	// SpacesAt says it as of the revision a range read reads
	// (spaces.WithKeptSpacesAt); nil when it cannot.
	SpacesAt(name, id string) func(ctx context.Context, revision int64) (func(space string) bool, error)
}

// Handler serves custom resources, each by its space's definition; other
// requests go to next.
type Handler struct {
	cfg  Config
	next http.Handler
	defs atomic.Pointer[Definitions]

	mu sync.Mutex
	// served are the handlers of the definitions in use, by identity;
	// replaced whole (copy on write), read without the lock.
	served atomic.Pointer[map[string]*definition]
	// ids memoizes the identity of each version of a CRD (by UID and
	// resource version), for a request must not hash a schema.
	ids sync.Map
	// watches are the open watches of each space's CRD (by spaces.Key),
	// and of each definition read across spaces (by spaces.WildcardOf).
	watchesMu sync.Mutex
	watches   map[string]map[*openWatch]bool
	// movedAt is, for each definition read across spaces, the revision
	// of the last change of CRD that moved a space to or from it (Moved):
	// a watch of it from before then would miss what the move changed.
	movedAt map[string]int64
	// prepared are the definitions Prepare made, and when: kept by Sweep
	// until a CRD has one, or a while (preparedFor) if none comes to.
	prepared map[string]time.Time
}

// preparedFor is how long Sweep keeps a prepared definition no CRD has.
const preparedFor = time.Minute

// definition is one definition's upstream handler.
type definition struct {
	handler http.Handler
	cache   cache.Indexer
	crd     *apiextensionsv1.CustomResourceDefinition
	// removed are what the upstream handler asked to hear of the CRD's
	// deletion: it tears its storage down then.
	removed []func(any)
}

// New returns a handler that passes every request to next until
// SetDefinitions.
func New(cfg Config, next http.Handler) *Handler {
	registerMetricsOnce.Do(func() { legacyregistry.MustRegister(servedDefinitions) })
	h := &Handler{cfg: cfg, next: next}
	h.served.Store(&map[string]*definition{})
	return h
}

// SetDefinitions starts serving custom resources by the definitions defs
// resolves.
func (h *Handler) SetDefinitions(defs Definitions) { h.defs.Store(&defs) }

// notFound is what the upstream handler answers, in the apiextensions
// server, for what it does not serve: the end of the delegation chain.
var notFound = http.NotFoundHandler()

func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	defs := h.defs.Load()
	ctx := req.Context()
	info, ok := request.RequestInfoFrom(ctx)
	if defs == nil || !ok || !info.IsResourceRequest || info.APIGroup == "" {
		h.next.ServeHTTP(w, req)
		return
	}
	space := spaces.SpaceOrRoot(ctx)
	byDefinition := spaces.DefinitionFrom(ctx)
	if byDefinition != "" {
		space = spaces.WildcardOf(byDefinition)
	}
	crd, err := (*defs).For(space, info.APIGroup, info.Resource)
	switch {
	case errors.Is(err, ErrNotServed):
		notFound.ServeHTTP(w, req)
		return
	case err != nil && h.cfg.Everywhere != nil:
		// CRDs per space: the upstream handler behind knows only the
		// root space's, which are not this request's to be served.
		writeStatus(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	case err != nil || crd == nil:
		// Not known here (yet), nor to the upstream handler behind, which
		// reads the same cache: it answers.
		h.next.ServeHTTP(w, req)
		return
	}
	// What the upstream handler asks of the CRD itself, asked of the
	// space's CRD: a definition's handler serves it whatever its state.
	if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) &&
		!apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		notFound.ServeHTTP(w, req)
		return
	}
	d, err := h.definitionOf(ctx, space, info.APIGroup, info.Resource)
	if err != nil || d == nil {
		if err != nil && !errors.Is(err, ErrNotServed) {
			klog.FromContext(ctx).Error(err, "making the handler of a custom resource definition", "crd", crd.Name)
		}
		if h.cfg.Everywhere != nil {
			// Gone between the two looks, or not to be made: as above.
			notFound.ServeHTTP(w, req)
			return
		}
		h.next.ServeHTTP(w, req)
		return
	}
	if !crd.DeletionTimestamp.IsZero() || apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating) {
		req = req.WithContext(context.WithValue(ctx, terminatingKey{}, true))
	}
	if byDefinition != "" {
		readers, ok := (*defs).(Readers)
		if !ok {
			notFound.ServeHTTP(w, req)
			return
		}
		// Every space's objects but those of the spaces that serve the
		// definition are left out by key, before they are decoded: the
		// definition's conversion never sees another's objects.
		kept := spaces.WithKeptSpaces(req.Context(), readers.Spaces(crd.Name, byDefinition))
		if at := readers.SpacesAt(crd.Name, byDefinition); at != nil {
			// A list is read as the spaces' CRDs are at its revision,
			// which the cache of CRDs may not have caught up with.
			kept = spaces.WithKeptSpacesAt(kept, at)
		}
		req = req.WithContext(kept)
		if info.Verb == "watch" {
			h.watchDefinition(w, req, d, byDefinition)
			return
		}
		d.handler.ServeHTTP(w, req)
		return
	}
	if info.Verb == "watch" {
		// Ended when the space's CRD changes to another definition
		// (Changed), as upstream ends the watches of a CRD it changes:
		// another space's keeping this one serves it no longer here.
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		forget := h.watching(spaces.Key(space, "", crd.Name), d.crd.UID, cancel)
		defer forget()
		req = req.WithContext(ctx)
	}
	d.handler.ServeHTTP(w, req)
}

// openWatch is a watch of a space's custom resources, on a definition.
type openWatch struct {
	definition types.UID
	cancel     context.CancelFunc
}

// watching records a watch of a space's CRD (by spaces.Key) on a
// definition, until the returned func is called.
func (h *Handler) watching(key string, definition types.UID, cancel context.CancelFunc) func() {
	w := &openWatch{definition: definition, cancel: cancel}
	h.watchesMu.Lock()
	defer h.watchesMu.Unlock()
	if h.watches == nil {
		h.watches = map[string]map[*openWatch]bool{}
	}
	if h.watches[key] == nil {
		h.watches[key] = map[*openWatch]bool{}
	}
	h.watches[key][w] = true
	return func() {
		h.watchesMu.Lock()
		defer h.watchesMu.Unlock()
		delete(h.watches[key], w)
		if len(h.watches[key]) == 0 {
			delete(h.watches, key)
		}
	}
}

// watchDefinition serves a watch of every space's objects of a definition:
// one from before a space moved to or from it is expired at once, and an
// open one is expired when one does (Moved), so that its reader lists
// again. The watch is known (watching) before the moves are read, so that
// a move is either read here or ends it.
func (h *Handler) watchDefinition(w http.ResponseWriter, req *http.Request, d *definition, id string) {
	expired := make(chan struct{})
	var once sync.Once
	forget := h.watching(spaces.WildcardOf(id), "", func() { once.Do(func() { close(expired) }) })
	defer forget()
	const moved = "a space's definition of the resource changed since: list again"
	if from := req.URL.Query().Get("resourceVersion"); from != "" && from != "0" {
		rv, err := strconv.ParseInt(from, 10, 64)
		h.watchesMu.Lock()
		at := h.movedAt[id]
		h.watchesMu.Unlock()
		if err == nil && rv < at {
			writeStatus(w, apierrors.NewResourceExpired(moved))
			return
		}
	}
	d.handler.ServeHTTP(w, req.WithContext(spaces.WithWatchExpiry(req.Context(), expired, moved)))
}

// Moved says that a space's CRD moved to or from the definitions ids, at
// revision: the watches of each read across spaces are expired, and so
// is a watch of one from before revision.
func (h *Handler) Moved(ids []string, revision string) {
	rv, err := strconv.ParseInt(revision, 10, 64)
	h.watchesMu.Lock()
	defer h.watchesMu.Unlock()
	for _, id := range ids {
		if err == nil && rv > h.movedAt[id] {
			if h.movedAt == nil {
				h.movedAt = map[string]int64{}
			}
			h.movedAt[id] = rv
		}
		for w := range h.watches[spaces.WildcardOf(id)] {
			w.cancel()
		}
	}
}

// Changed ends the watches of a space's CRD (by spaces.Key) that are not
// on its definition now: crd is the CRD as it is, nil once deleted.
func (h *Handler) Changed(key string, crd *apiextensionsv1.CustomResourceDefinition) {
	now := types.UID("")
	if crd != nil {
		now = types.UID(h.identity(crd))
	}
	h.watchesMu.Lock()
	defer h.watchesMu.Unlock()
	for w := range h.watches[key] {
		if w.definition != now {
			w.cancel()
		}
	}
}

// Identity is a definition's identity (spaces.DefinitionIdentity): what
// the upstream handler serves by, the spec and the accepted names. A CRD's
// state (accepted, established, terminating) is not part of it: the
// dispatcher reads it from the space's CRD at each request, so that a CRD
// being deleted keeps its storage, and its watches, until it is gone, as
// upstream does.
func Identity(crd *apiextensionsv1.CustomResourceDefinition) string {
	return spaces.DefinitionIdentity(crd)
}

// identity is Identity, memoized, and told apart for a definition of one
// space's own (Config.Everywhere), whose storage is not the same.
func (h *Handler) identity(crd *apiextensionsv1.CustomResourceDefinition) string {
	key := string(crd.UID) + "/" + crd.ResourceVersion
	if id, ok := h.ids.Load(key); ok {
		return id.(string)
	}
	id := Identity(crd)
	if h.own(crd) {
		id = "own-" + id
	}
	h.ids.Store(key, id)
	return id
}

// definitionOf returns the handler of the definition that defines
// group/resource in space, made on first use; nil when none does any
// more.
func (h *Handler) definitionOf(ctx context.Context, space, group, resource string) (*definition, error) {
	defs := h.defs.Load()
	crd, err := (*defs).For(space, group, resource)
	if err != nil || crd == nil {
		return nil, err
	}
	id := h.identity(crd)
	if d := (*h.served.Load())[id]; d != nil {
		return d, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Again under the lock, which Sweep holds while it looks at what is
	// in use: a definition is not made from a CRD a change has passed.
	if crd, err = (*defs).For(space, group, resource); err != nil || crd == nil {
		return nil, err
	}
	id = h.identity(crd)
	if d := (*h.served.Load())[id]; d != nil {
		return d, nil
	}
	d, err := h.add(id, crd)
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("serving a custom resource definition", "crd", crd.Name, "definition", id)
	return d, nil
}

// add makes the handler of a definition and serves it; h.mu is held.
func (h *Handler) add(id string, crd *apiextensionsv1.CustomResourceDefinition) (*definition, error) {
	d, err := h.newDefinition(id, crd)
	if err != nil {
		return nil, err
	}
	served := *h.served.Load()
	next := make(map[string]*definition, len(served)+1)
	for k, v := range served {
		next[k] = v
	}
	next[id] = d
	h.served.Store(&next)
	servedDefinitions.Inc()
	return d, nil
}

// Prepare makes the handler of a CRD's definition ahead of its first
// request, for the CRD's status to say Established only once it is served
// at once: how soon that comes is then the same whether or not another
// space serves the same definition already (docs/design/crds.md).
func (h *Handler) Prepare(crd *apiextensionsv1.CustomResourceDefinition) error {
	id := Identity(crd)
	if h.own(crd) {
		id = "own-" + id
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prepared == nil {
		h.prepared = map[string]time.Time{}
	}
	h.prepared[id] = time.Now()
	if (*h.served.Load())[id] != nil {
		return nil
	}
	_, err := h.add(id, crd)
	return err
}

// newDefinition makes the upstream handler of one definition: its cache
// holds the definition alone, under the identity as UID, which is what the
// upstream handler keys its storage by, accepted and established.
func (h *Handler) newDefinition(id string, crd *apiextensionsv1.CustomResourceDefinition) (*definition, error) {
	established := metav1.Now()
	if c := apiextensionshelpers.FindCRDCondition(crd, apiextensionsv1.Established); c != nil && c.Status == apiextensionsv1.ConditionTrue {
		// A create within 2 s of it waits, for the other servers to see it.
		established = c.LastTransitionTime
	}
	def := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name, UID: types.UID(id)},
		Spec:       *crd.Spec.DeepCopy(),
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: *crd.Status.AcceptedNames.DeepCopy(),
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: established},
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: established}}},
	}
	d := &definition{cache: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), crd: def}
	if err := d.cache.Add(def); err != nil {
		return nil, err
	}
	// The upstream handler's other arguments serve discovery, which stays
	// upstream's (no resource request asks for it), and the establishing
	// of a CRD, which a definition, already established, never asks.
	getter := h.cfg.RESTOptionsGetter
	if h.own(crd) {
		getter = h.cfg.OwnRESTOptionsGetter
	}
	handler, err := apiextensionsapiserver.NewCustomResourceDefinitionHandler(nil, nil, &oneCRD{d: d}, notFound,
		getter, terminatingAdmission{h.cfg.Admission}, nil, h.cfg.ServiceResolver, h.cfg.AuthResolverWrapper, 1, h.cfg.Authorizer,
		h.cfg.RequestTimeout, h.cfg.MinRequestTimeout, h.cfg.StaticOpenAPISpec, h.cfg.MaxRequestBodyBytes)
	if err != nil {
		return nil, err
	}
	// Everything that serves it made now (schemas, CEL, field sets,
	// storage), not at its first request: that request is then as quick
	// whether or not another space serves the definition already.
	if _, err := handler.GetCustomResourceListerCollectionDeleter(def); err != nil {
		return nil, err
	}
	d.handler = handler
	return d, nil
}

// own tells whether a CRD's instances are stored by OwnRESTOptionsGetter.
func (h *Handler) own(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return h.cfg.Everywhere != nil && h.cfg.OwnRESTOptionsGetter != nil && !h.cfg.Everywhere(crd)
}

// writeStatus answers with an API error, in JSON.
func writeStatus(w http.ResponseWriter, err apierrors.APIStatus) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	body, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(body)
}

// Sweep stops serving the definitions no space serves any more (a CRD
// changed or deleted): the upstream handler tears each one's storage down
// once the requests it is serving are done.
func (h *Handler) Sweep(ctx context.Context) error {
	defs := h.defs.Load()
	if defs == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	inUse, versions, identities := map[string]bool{}, map[string]bool{}, map[string]bool{}
	if err := (*defs).InUse(func(crd *apiextensionsv1.CustomResourceDefinition) {
		id := h.identity(crd)
		inUse[id] = true
		identities[strings.TrimPrefix(id, "own-")] = true
		versions[string(crd.UID)+"/"+crd.ResourceVersion] = true
	}); err != nil {
		return err
	}
	// A definition no space has is read by none: its moves are history.
	h.watchesMu.Lock()
	for id := range h.movedAt {
		if !identities[id] {
			delete(h.movedAt, id)
		}
	}
	h.watchesMu.Unlock()
	h.ids.Range(func(k, _ any) bool {
		if !versions[k.(string)] {
			h.ids.Delete(k)
		}
		return true
	})
	for id, at := range h.prepared {
		// A prepared definition is kept until a CRD has it (then it is
		// in use, for as long as one does), or a while if none comes to.
		if inUse[id] || time.Since(at) > preparedFor {
			delete(h.prepared, id)
		}
	}
	h.letGo(ctx, func(id string) bool {
		_, prepared := h.prepared[id]
		return !inUse[id] && !prepared
	})
	return nil
}

// Destroy stops serving every definition, when the server shuts down.
func (h *Handler) Destroy() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.letGo(context.Background(), func(string) bool { return true })
}

// letGo stops serving the definitions gone says are. Called with h.mu
// held.
func (h *Handler) letGo(ctx context.Context, gone func(id string) bool) {
	served := *h.served.Load()
	next := make(map[string]*definition, len(served))
	var stopped []*definition
	for id, d := range served {
		if gone(id) {
			stopped = append(stopped, d)
		} else {
			next[id] = d
		}
	}
	if len(stopped) == 0 {
		return
	}
	h.served.Store(&next)
	servedDefinitions.Add(-float64(len(stopped)))
	for _, d := range stopped {
		klog.FromContext(ctx).V(2).Info("no longer serving a custom resource definition", "crd", d.crd.Name, "definition", string(d.crd.UID))
		if err := d.cache.Delete(d.crd); err != nil {
			klog.FromContext(ctx).Error(err, "letting go of a custom resource definition", "crd", d.crd.Name)
		}
		for _, f := range d.removed {
			f(d.crd)
		}
	}
}

// terminatingKey marks a request for the custom resources of a CRD being
// deleted (in the request's space).
type terminatingKey struct{}

// terminatingAdmission refuses creates of the custom resources of a CRD
// being deleted, as the upstream handler does for a terminating CRD, in
// front of the server's admission.
type terminatingAdmission struct{ delegate admission.Interface }

var (
	_ admission.MutationInterface   = terminatingAdmission{}
	_ admission.ValidationInterface = terminatingAdmission{}
)

func (t terminatingAdmission) Handles(op admission.Operation) bool {
	return op == admission.Create || t.delegate.Handles(op)
}

func (t terminatingAdmission) refuse(ctx context.Context, a admission.Attributes) error {
	if a.GetOperation() == admission.Create && ctx.Value(terminatingKey{}) != nil {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(),
			errors.New("create not allowed while custom resource definition is terminating"))
	}
	return nil
}

func (t terminatingAdmission) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if err := t.refuse(ctx, a); err != nil {
		return err
	}
	if m, ok := t.delegate.(admission.MutationInterface); ok && m.Handles(a.GetOperation()) {
		return m.Admit(ctx, a, o)
	}
	return nil
}

func (t terminatingAdmission) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if err := t.refuse(ctx, a); err != nil {
		return err
	}
	if v, ok := t.delegate.(admission.ValidationInterface); ok && v.Handles(a.GetOperation()) {
		return v.Validate(ctx, a, o)
	}
	return nil
}

// Served returns how many definitions are served, for tests and metrics.
func (h *Handler) Served() int { return len(*h.served.Load()) }

// oneCRD is the informer the upstream handler is made with: a cache of
// one definition, which never changes (a changed CRD is another
// definition), and the deletion that tears it down (Sweep).
type oneCRD struct{ d *definition }

var _ apiextensionsinformers.CustomResourceDefinitionInformer = &oneCRD{}

func (o *oneCRD) Informer() cache.SharedIndexInformer { return &oneInformer{d: o.d} }

func (o *oneCRD) Lister() apiextensionslisters.CustomResourceDefinitionLister {
	return apiextensionslisters.NewCustomResourceDefinitionLister(o.d.cache)
}

// oneInformer takes the upstream handler's event handler; nothing else of
// an informer is asked of it (calling anything else panics, through the
// nil interface embedded).
type oneInformer struct {
	cache.SharedIndexInformer
	d *definition
}

func (i *oneInformer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.d.removed = append(i.d.removed, handler.OnDelete)
	return nil, nil // the upstream handler keeps no registration
}

func (i *oneInformer) GetIndexer() cache.Indexer { return i.d.cache }

func (i *oneInformer) HasSynced() bool { return true }

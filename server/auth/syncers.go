// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/spaces"
)

// SyncTargetsGVR is the resource the SyncTarget cache watches.
var SyncTargetsGVR = schema.GroupVersionResource{Group: edgeGroup, Version: "v2alpha1", Resource: syncTargetsPlural}

// Syncers is the server side of syncer identities: the token authenticator
// and the SyncTarget cache the authorizer and SyncerInfoHandler consult.
// Both work from caches that Start fills; until then syncers get 401.
type Syncers struct {
	Tokens      *SyncerTokens
	SyncTargets *SyncTargetCache
	// Requests ends syncers' requests (tunnels, watches) when their token
	// stops authenticating; WithSyncerRequests registers them.
	Requests *Revoker
	// SyncTargetHandlers also hear the SyncTarget cache's changes; set
	// them before Start.
	SyncTargetHandlers []cache.ResourceEventHandler
}

// NewSyncers returns them for the server whose CA certificate is caPEM.
func NewSyncers(caPEM []byte) *Syncers {
	syncTargets := &SyncTargetCache{}
	tokens := NewSyncerTokens(caPEM, syncTargets)
	return &Syncers{Tokens: tokens, SyncTargets: syncTargets, Requests: NewRevoker(tokens.StillValid)}
}

// Start runs the caches until ctx is done: the token Secrets of the root
// space and the SyncTargets of every space, through loopback (a root-space
// client configuration with full privileges). It returns once both have
// synced; the SyncTarget CRD must be served by then.
func (s *Syncers) Start(ctx context.Context, loopback *rest.Config) error {
	kube, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(TokenNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = TokenSelector.String() }))
	secrets := factory.Core().V1().Secrets()
	secretInformer := secrets.Informer()
	if _, err := secretInformer.AddEventHandler(s.Requests.TokenSecretHandler()); err != nil {
		return err
	}
	factory.Start(ctx.Done())

	dyn, err := dynamic.NewForConfig(spaces.ScopedConfig(loopback))
	if err != nil {
		return err
	}
	wildcard := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, spaces.Wildcard) }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return dyn.Resource(SyncTargetsGVR).List(wildcard(ctx), opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return dyn.Resource(SyncTargetsGVR).Watch(wildcard(ctx), opts)
		},
	}
	// Of each SyncTarget the cache keeps what its readers read: the UID
	// and mailbox (tokens), the tunnel's condition and server (the tunnel's
	// first guess before it patches them).
	indexer, controller := spaces.NewInformerWithOptions(lw, &unstructured.Unstructured{},
		handlers(append([]cache.ResourceEventHandler{s.Requests.SyncTargetHandler()}, s.SyncTargetHandlers...)),
		spaces.InformerOptions{Transform: spaces.KeepOnly(CachedSyncTargetFields...)})
	go controller.RunWithContext(ctx)
	go s.Requests.Run(ctx)

	if !cache.WaitForCacheSync(ctx.Done(), secretInformer.HasSynced, controller.HasSynced) {
		return errors.New("syncer token and SyncTarget caches did not sync")
	}
	// SyncTargets first: a token is checked against its SyncTarget's UID.
	s.SyncTargets.Set(indexer)
	s.Tokens.SetSecrets(secrets.Lister().Secrets(TokenNamespace))
	klog.FromContext(ctx).V(2).Info("syncer tokens are served")
	return nil
}

// handlers is one handler that passes each change to all of hs, in order.
type handlers []cache.ResourceEventHandler

func (hs handlers) OnAdd(obj any, initial bool) {
	for _, h := range hs {
		h.OnAdd(obj, initial)
	}
}

func (hs handlers) OnUpdate(old, obj any) {
	for _, h := range hs {
		h.OnUpdate(old, obj)
	}
}

func (hs handlers) OnDelete(obj any) {
	for _, h := range hs {
		h.OnDelete(obj)
	}
}

// CachedSyncTargetFields are the fields of a SyncTarget, besides its
// identity, that SyncTargetCache keeps (spaces.KeepOnly).
var CachedSyncTargetFields = [][]string{
	{"status", "mailboxSpace"}, {"status", "tunnelServer"}, {"status", "conditions"},
}

// SyncTargetCache answers SyncTargetLookup from a cache of SyncTargets of
// every space (unstructured, keyed by spaces.KeyFunc, holding
// CachedSyncTargetFields); until it is set, no SyncTarget is found.
type SyncTargetCache struct {
	indexer atomic.Pointer[indexerBox]
	// Spaces, when set, says whether a mailbox space is made yet: a
	// SyncTarget names its mailbox from its creation, moments before the
	// mailbox controller makes it. Unset, the name is taken as made.
	Spaces spaces.Lookup
}

type indexerBox struct{ cache.Indexer }

var _ SyncTargetLookup = &SyncTargetCache{}

// Set sets the cache.
func (c *SyncTargetCache) Set(indexer cache.Indexer) { c.indexer.Store(&indexerBox{indexer}) }

// Get returns a cached SyncTarget, if any: the cache's own object, to be
// copied before any change, with its identity and CachedSyncTargetFields
// only.
func (c *SyncTargetCache) Get(inventorySpace, name string) (*unstructured.Unstructured, bool) {
	return c.get(inventorySpace, name)
}

// get returns a cached SyncTarget, if any.
func (c *SyncTargetCache) get(inventorySpace, name string) (*unstructured.Unstructured, bool) {
	box := c.indexer.Load()
	if box == nil {
		return nil, false
	}
	obj, exists, err := box.GetByKey(spaces.Key(inventorySpace, "", name))
	if err != nil || !exists {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// MailboxOf implements SyncTargetLookup. The mailbox is derived from what
// the server alone assigns, the SyncTarget's space and UID
// (spaces.MailboxName), so no status write can point a syncer at another
// space; it is given out once status.mailboxSpace names it (the server
// stores a SyncTarget naming it, and the mailbox controller names it again
// should anyone change that) and its space is made. While the server's
// cache of Spaces has not synced, the status alone decides, as the space
// filter answers 503 for the mailbox meanwhile; a mailbox being deleted is
// still its syncer's, which sees its copies go.
func (c *SyncTargetCache) MailboxOf(inventorySpace, name string) (string, bool) {
	u, ok := c.get(inventorySpace, name)
	if !ok || u.GetUID() == "" {
		return "", false
	}
	mailbox := spaces.MailboxName(inventorySpace, string(u.GetUID()))
	if recorded, _, _ := unstructured.NestedString(u.Object, "status", "mailboxSpace"); recorded != mailbox {
		return "", true
	}
	if c.Spaces != nil {
		if _, found, err := c.Spaces.SpacePhase(mailbox); err == nil && !found {
			return "", true
		}
	}
	return mailbox, true
}

// UIDOf implements SyncTargetUIDs.
func (c *SyncTargetCache) UIDOf(inventorySpace, name string) (types.UID, bool) {
	u, ok := c.get(inventorySpace, name)
	if !ok {
		return "", false
	}
	return u.GetUID(), true
}

// CACertsHandler serves the CA certificate at jointoken.CACertsPath, byte
// for byte what jointoken.CAHash hashes.
func CACertsHandler(caPEM []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "cacerts"}, req.Method))
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Header().Set("Content-Length", fmt.Sprint(len(caPEM)))
		if req.Method == http.MethodGet {
			_, _ = w.Write(caPEM)
		}
	})
}

// SyncerInfoHandler serves jointoken.SyncerInfoPath: it tells a syncer its
// SyncTarget and mailbox, and refuses anyone else.
func SyncerInfoHandler(syncTargets SyncTargetLookup) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, _ := genericapirequest.UserFrom(req.Context())
		inv, st, ok := principal.SyncTargetOf(u)
		if !ok {
			name := "<anonymous>"
			if u != nil {
				name = u.GetName()
			}
			writeError(w, apierrors.NewForbidden(schema.GroupResource{}, "",
				fmt.Errorf("user %q is no syncer: %s describes the syncer of the token in use", name, jointoken.SyncerInfoPath)))
			return
		}
		info := jointoken.SyncerInfo{InventorySpace: inv, SyncTarget: st}
		info.MailboxSpace, _ = syncTargets.MailboxOf(inv, st)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(info)
	})
}

func writeError(w http.ResponseWriter, err *apierrors.StatusError) {
	s := err.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(s)
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/apis/crds"
	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/dashboard"
	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/server/fairness"
	"github.com/kubestellar/kubestellar/server/kubeconfig"
	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/spacecontroller"
	"github.com/kubestellar/kubestellar/tunnel"
)

// Server is a configured kubestellar server, ready to Run.
type Server struct {
	cfg     *Config
	core    *genericapiserver.GenericAPIServer
	ext     *apiextensionsapiserver.CustomResourceDefinitions
	onReady func()
	tunnels *tunnel.Server
	// dashboard is what the dashboard shows.
	dashboard *dashboard.Store
	// plain listens for --http-address, if set.
	plain net.Listener
}

// BaseURL is the URL clients on this machine reach the server at.
func (c *Config) BaseURL() string {
	return "https://" + net.JoinHostPort(c.Options.KubeconfigHost, strconv.Itoa(c.Options.Port))
}

// AdminKubeconfigPath is the admin kubeconfig in the data directory.
func (c *Config) AdminKubeconfigPath() string {
	return filepath.Join(c.Options.DataDir, kubeconfig.AdminFile)
}

// New builds the API servers: the core server for built-in kinds, with the
// apiextensions server behind it for CRDs and custom resources; then what
// the server serves besides the APIs (the syncers' endpoints, the tunnels,
// the dashboard) and its start-up and shutdown hooks.
func (c *Config) New(ctx context.Context) (*Server, error) {
	s := &Server{cfg: c}
	if err := s.newAPIServers(); err != nil {
		return nil, err
	}
	s.core.Handler.NonGoRestfulMux.Handle(jointoken.CACertsPath, auth.CACertsHandler(c.CA.PEM))
	s.core.Handler.NonGoRestfulMux.Handle(jointoken.SyncerInfoPath, auth.SyncerInfoHandler(c.syncers.SyncTargets))
	if err := s.serveTunnels(ctx); err != nil {
		return nil, err
	}
	if err := s.serveDashboard(ctx); err != nil {
		return nil, err
	}
	if addr := c.Options.HTTPAddress; addr != "" {
		var err error
		if s.plain, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("--http-address: %w", err)
		}
	}
	if err := s.addHooks(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// newAPIServers makes the apiextensions server and the core server in
// front of it, and installs the built-in API groups.
func (s *Server) newAPIServers() error {
	c := s.cfg
	// The dashboard's event streams stay open: no request timeout for them.
	longRunning := c.core.LongRunningFunc
	c.core.LongRunningFunc = func(r *http.Request, ri *request.RequestInfo) bool {
		return dashboard.IsLongRunning(r) || (longRunning != nil && longRunning(r, ri))
	}
	ext, err := c.extensions.Complete().New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return fmt.Errorf("creating apiextensions server: %w", err)
	}
	completed := c.core.Complete()
	// Complete put the loopback client's token in front of our
	// authenticators; every identity they return, its included, is marked
	// as the server's word (internal/provenance), so that no identity built
	// from impersonation headers passes for the server, an admin or a
	// syncer.
	completed.Authentication.Authenticator = provenance.Authenticated(completed.Authentication.Authenticator)
	core, err := completed.New("kubestellar", ext.GenericAPIServer)
	if err != nil {
		return fmt.Errorf("creating API server: %w", err)
	}
	// Destroy runs after the last request: stop every watch cache at once
	// before the API groups destroy their storages one by one.
	core.RegisterDestroyFunc(c.Datastore.StopCaches)
	if err := core.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, c.legacy); err != nil {
		return fmt.Errorf("installing core API: %w", err)
	}
	if err := core.InstallAPIGroups(c.groups...); err != nil {
		return fmt.Errorf("installing API groups: %w", err)
	}
	// Without kube-aggregator in front, only the core server's /openapi is
	// reachable. Mount the apiextensions group's routes there too, so the
	// core server's OpenAPI documents cover it (kubectl explain crd).
	for _, ws := range ext.GenericAPIServer.Handler.GoRestfulContainer.RegisteredWebServices() {
		if strings.HasPrefix(ws.RootPath(), "/apis/"+apiextensionsv1.GroupName+"/") {
			core.Handler.GoRestfulContainer.Add(ws)
		}
	}
	s.core, s.ext = core, ext
	return s.serveCustomResources(ext.Informers.Apiextensions().V1().CustomResourceDefinitions())
}

// serveTunnels serves the syncers' reverse tunnels and the edge proxy
// through them; with several servers, a request for a tunnel another
// server holds goes to that server.
func (s *Server) serveTunnels(ctx context.Context) error {
	c := s.cfg
	// The tunnels outlive ctx: the pre-shutdown hook ends them, once their
	// SyncTargets say so.
	s.tunnels = tunnel.NewServer(context.WithoutCancel(ctx), tunnelOwner, c.syncerConnected.Changed, c.syncers.SyncTargets.UIDOf)
	if c.Options.DatastoreEndpoint != "" {
		clients := &spaceClients{base: s.core.LoopbackClientConfig}
		peers, err := tunnel.NewPeers(c.Options.SelfURL(), c.CA.PEM, c.AdminToken, clients.tunnelServer)
		if err != nil {
			return err
		}
		s.tunnels.SetPeers(peers)
	}
	s.core.Handler.NonGoRestfulMux.Handle(tunnel.Path, s.tunnels)
	s.core.Handler.NonGoRestfulMux.HandlePrefix(tunnel.EdgesPrefix, s.tunnels.EdgeProxy())
	return nil
}

// serveDashboard serves the dashboard: auth lets /dashboard/ through
// without a token; the handler checks its own sessions.
func (s *Server) serveDashboard(ctx context.Context) error {
	c := s.cfg
	store := dashboard.NewStore()
	store.ReadInProcess(c.copies)
	s.dashboard = store
	dash, err := dashboard.NewHandler(ctx, dashboard.Options{Store: store, Sessions: dashboard.NewSessions(time.Now),
		Authorizer: c.core.Authorization.Authorizer, Loopback: s.core.LoopbackClientConfig, VisibleSpaces: c.users.VisibleSpaces})
	if err != nil {
		return err
	}
	s.core.Handler.NonGoRestfulMux.Handle(dashboard.Path, dash)
	s.core.Handler.NonGoRestfulMux.HandlePrefix(dashboard.Path+"/", dash)
	return s.core.AddPostStartHook("kubestellar-dashboard", func(hookCtx genericapiserver.PostStartHookContext) error {
		return store.Start(hookCtx.Context, hookCtx.LoopbackClientConfig, 5*time.Second)
	})
}

// addHooks adds what runs as the server starts, before it says it is
// ready, and as it shuts down.
func (s *Server) addHooks(ctx context.Context) error {
	c, core := s.cfg, s.core
	// Ready once every watch cache has its first list, as kube-apiserver
	// (its storage-readiness hook); until then a cache answers 429.
	if err := core.AddPostStartHook("storage-readiness", core.StorageReadinessHook.Hook); err != nil {
		return err
	}
	// The APF configuration in the root space, before the server is ready.
	if err := core.AddPostStartHook("kubestellar-priority-and-fairness", func(hookCtx genericapiserver.PostStartHookContext) error {
		err := fairness.Ensure(hookCtx.Context, c.core.SharedInformerFactory, c.flowcontrol)
		if err != nil && hookCtx.Context.Err() != nil {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	// Say the tunnels are closing while the API still serves, then close
	// them: SyncTargets show the outage, and a syncer that does not come
	// back stays shown so. No tunnel opens meanwhile (Drain).
	if err := core.AddPreShutdownHook("kubestellar-tunnels", func() error {
		defer s.tunnels.Close()
		return c.syncerConnected.Closing(s.tunnels.Drain())
	}); err != nil {
		return err
	}
	return core.AddPostStartHook("kubestellar-spaces", func(hookCtx genericapiserver.PostStartHookContext) error {
		// A failed hook ends the process (klog.Fatal); one interrupted by
		// shutdown has not failed.
		err := s.startUp(ctx, hookCtx)
		if err != nil && hookCtx.Context.Err() != nil {
			klog.FromContext(ctx).Info("server stopped before it was ready", "err", err)
			return nil
		}
		return err
	})
}

// startUp starts, in order, what the server needs before it is ready:
// kubestellar's CRDs, the caches behind syncer tokens, SyncerConfigs and
// RBAC, and the spaces with their control loops.
func (s *Server) startUp(ctx context.Context, hookCtx genericapiserver.PostStartHookContext) error {
	c := s.cfg
	logger := klog.FromContext(ctx)
	began := time.Now()
	// The space machinery watches Spaces, a CRD of ours: install first.
	if err := s.installCRDs(hookCtx); err != nil {
		return err
	}
	logger.V(1).Info("start-up: kubestellar's CRDs served", "took", time.Since(began))
	// The caches behind syncer tokens, SyncerConfigs and RBAC need
	// kubestellar's CRDs served, and nothing else. Syncer tokens come
	// first, on their own: after a restart every syncer is knocking, and
	// its tunnel comes back as soon as its token is known, while the
	// spaces and the controllers start. The other caches fill beside
	// those.
	if err := c.syncers.Start(hookCtx.Context, hookCtx.LoopbackClientConfig); err != nil {
		return err
	}
	logger.V(1).Info("start-up: syncer tokens served", "took", time.Since(began))
	caches := []func(context.Context, *rest.Config) error{c.syncerConfigs.start, c.rbac.Start}
	started := make(chan error, len(caches))
	for _, start := range caches {
		go func() { started <- start(hookCtx.Context, hookCtx.LoopbackClientConfig) }()
	}
	if err := s.startSpaces(hookCtx); err != nil {
		return err
	}
	logger.V(1).Info("start-up: spaces and control loops started", "took", time.Since(began))
	var errs []error
	for range caches {
		errs = append(errs, <-started)
	}
	logger.V(1).Info("start-up: caches synced", "took", time.Since(began))
	return errors.Join(errs...)
}

// Run serves until ctx is done, then shuts down: the API server first, the
// datastore last.
func (s *Server) Run(ctx context.Context) error {
	defer s.cfg.Close()
	defer s.tunnels.Close()
	prepared := s.core.PrepareRun()
	if err := installLazyOpenAPI(s.core, s.cfg.core.OpenAPIConfig, s.cfg.core.OpenAPIV3Config); err != nil {
		return err
	}
	// The apiextensions server publishes CRD schemas into the OpenAPI
	// documents of the server it belongs to; point it at the core server's,
	// which are the ones clients see.
	s.ext.GenericAPIServer.StaticOpenAPISpec = s.core.StaticOpenAPISpec
	s.ext.GenericAPIServer.OpenAPIVersionedService = s.core.OpenAPIVersionedService
	s.ext.GenericAPIServer.OpenAPIV3VersionedService = s.core.OpenAPIV3VersionedService
	if err := kubeconfig.UpdateAdmin(s.cfg.AdminKubeconfigPath(), s.cfg.BaseURL(), s.cfg.CA.PEM, s.cfg.AdminToken); err != nil {
		return fmt.Errorf("writing admin kubeconfig: %w", err)
	}
	klog.FromContext(ctx).Info("serving", "url", s.cfg.BaseURL(), "kubeconfig", s.cfg.AdminKubeconfigPath())
	if s.onReady != nil {
		go s.awaitReady(ctx)
	}
	if s.plain != nil {
		go s.servePlain(ctx)
	}
	return prepared.RunWithContext(ctx)
}

// servePlain serves the API, with every filter of the HTTPS port, over
// plain HTTP on --http-address until ctx ends: for a load balancer that
// terminates TLS and does not re-encrypt. Identity is in bearer tokens,
// which pass through such a load balancer; client certificates do not.
func (s *Server) servePlain(ctx context.Context) {
	logger := klog.FromContext(ctx)
	srv := &http.Server{Handler: s.core.Handler, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		// As the HTTPS port: a moment for requests to finish, then close
		// what is left (watches, tunnels).
		stop, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(stop); err != nil {
			_ = srv.Close()
		}
	}()
	logger.Info("serving over plain HTTP, for a TLS-terminating load balancer", "address", s.plain.Addr().String())
	if err := srv.Serve(s.plain); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error(err, "plain HTTP listener failed", "address", s.plain.Addr().String())
	}
}

// OnReady sets a function to call once the server is ready: /readyz is ok,
// which needs every post-start hook done, and so the CRDs installed and the
// spaces machinery and controllers started.
func (s *Server) OnReady(f func()) { s.onReady = f }

func (s *Server) awaitReady(ctx context.Context) {
	client, err := rest.HTTPClientFor(s.core.LoopbackClientConfig)
	if err != nil {
		klog.FromContext(ctx).Error(err, "cannot check readiness")
		return
	}
	url := s.core.LoopbackClientConfig.Host + "/readyz"
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err == nil {
		klog.FromContext(ctx).Info("ready")
		s.onReady()
	}
}

// installCRDs creates or updates kubestellar's own CRDs and waits until
// they are served.
func (s *Server) installCRDs(hookCtx genericapiserver.PostStartHookContext) error {
	ctx := hookCtx.Context
	client, err := apiextensionsclient.NewForConfig(hookCtx.LoopbackClientConfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(hookCtx.LoopbackClientConfig)
	if err != nil {
		return err
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, want := range all {
		// Served in every space (spaces.ServedEverywhere).
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[spaces.BoundAnnotation] = spaces.AllSpaces
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			have, err := crdClient.Get(ctx, want.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, err = crdClient.Create(ctx, want, metav1.CreateOptions{})
			case err == nil:
				have.Spec = want.Spec
				have.Labels, have.Annotations = want.Labels, want.Annotations
				_, err = crdClient.Update(ctx, have, metav1.UpdateOptions{})
			}
			if err != nil {
				klog.FromContext(ctx).V(2).Info("installing CRD, will retry", "crd", want.Name, "err", err.Error())
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", want.Name, err)
		}
	}
	// A CRD is ready once established and served by this run's CRD handler
	// (a CRD stored as Established by an earlier run is served only once the
	// handler has caught up).
	// The server is not ready until they are, however long that takes (a
	// loaded machine, a slow datastore): it says every 10 s what it waits
	// for rather than give up and exit.
	for _, want := range all {
		gvr := schema.GroupVersionResource{Group: want.Spec.Group, Version: want.Spec.Versions[0].Name, Resource: want.Spec.Names.Plural}
		var lastErr error
		began, said := time.Now(), time.Now()
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, lastErr = dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if lastErr != nil && time.Since(said) > 10*time.Second {
				said = time.Now()
				conditions := crdConditions(crdClient, want.Name)
				klog.FromContext(ctx).Info("start-up: waiting for a CRD of kubestellar to be served", "resource", gvr.String(),
					"waited", time.Since(began).Round(time.Second), "lastAnswer", lastErr.Error(), "crd", conditions)
				if conditions == noConditions {
					nudgeCRD(ctx, crdClient, want.Name)
				}
			}
			return lastErr == nil, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for %s to be served: %w (last answer: %v; the CRD: %s)", gvr, err, lastErr, crdConditions(crdClient, want.Name))
		}
	}
	return nil
}

// noConditions is crdConditions' answer for a CRD no controller has
// looked at.
const noConditions = "no conditions yet"

// nudgeCRD writes a CRD again, with the time in an annotation, so that the
// CRD controllers get an event for it. On PostgreSQL and MySQL, a CRD
// created while their informers listed can be missed for good: kine
// answers a list with the highest revision written (MAX(id)) while a
// lower one, allocated first, is still being committed, and the watch
// from that revision never sends it (k3s-io/kine#676). Seen at start-up
// on a fresh PostgreSQL: the CRD stored, with no condition after a minute.
func nudgeCRD(ctx context.Context, client apiextensionsv1client.CustomResourceDefinitionInterface, name string) {
	logger := klog.FromContext(ctx)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if crd.Annotations == nil {
			crd.Annotations = map[string]string{}
		}
		crd.Annotations[nudgedAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		_, err = client.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		logger.Info("start-up: could not write the CRD again", "crd", name, "err", err.Error())
		return
	}
	logger.Info("start-up: wrote a CRD of kubestellar again, which no CRD controller had seen (a list that missed its create)", "crd", name)
}

// nudgedAnnotation on a CRD of kubestellar says when start-up last wrote
// it again for its controllers to see it (nudgeCRD).
const nudgedAnnotation = "kubestellar.io/start-up-rewritten"

// crdConditions describes a CRD's conditions as stored, for an error
// message.
func crdConditions(client apiextensionsv1client.CustomResourceDefinitionInterface, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	crd, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, c := range crd.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	if len(out) == 0 {
		return noConditions
	}
	return strings.Join(out, ", ")
}

// startSpaces starts what makes spaces work: the cache of Space objects the
// request filter consults, and the space, namespace and CRD-instance
// controllers.
func (s *Server) startSpaces(hookCtx genericapiserver.PostStartHookContext) error {
	ctx := klog.NewContext(hookCtx.Context, klog.FromContext(hookCtx.Context))
	loopback := hookCtx.LoopbackClientConfig
	clients := &spaceClients{base: loopback}
	root, err := clients.Dynamic(spaces.Root)
	if err != nil {
		return err
	}
	spaceInformer := dynamicinformer.NewFilteredDynamicInformer(root, tenancyv1alpha1.SpacesGVR, "", 0, cache.Indexers{}, nil)
	// A Space's managed fields are half of it; the space controller writes
	// Spaces by update, which keeps them where the request has none.
	if err := spaceInformer.Informer().SetTransform(spaces.DropManagedFields); err != nil {
		return err
	}
	go spaceInformer.Informer().RunWithContext(ctx)

	etcd, err := s.cfg.Datastore.Client(ctx, 10*time.Second)
	if err != nil {
		return fmt.Errorf("connecting to datastore: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = etcd.Close()
	}()
	s.cfg.objects.client.Store(etcd)
	usageClient := s.cfg.Datastore.UsageClient()
	if usageClient == nil {
		usageClient = etcd
	}
	s.cfg.quotas.usage.MailboxEvents = s.cfg.Datastore.CountMailboxes
	go s.cfg.quotas.usage.Run(ctx, usageClient)
	quotaInformer, err := s.cfg.quotas.startQuotaCache(ctx, root)
	if err != nil {
		return err
	}
	purger := &spaces.Purger{Client: etcd, KeyPrefix: storage.KeyPrefix, BuiltIn: builtin.IsBuiltIn}
	if !s.cfg.Options.CRDsPerSpace {
		// CRDs are stored once for all spaces.
		purger.Global = []string{storage.ResourcePrefix(apiextensionsv1.Resource("customresourcedefinitions"))}
	}

	rootKube, err := clients.Kube(spaces.Root)
	if err != nil {
		return err
	}
	for _, ns := range spacecontroller.InitialNamespaces {
		if _, err := rootKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s in the root space: %w", ns, err)
		}
	}
	extClient, err := apiextensionsclient.NewForConfig(loopback)
	if err != nil {
		return err
	}
	crdInformers := apiextensionsinformers.NewSharedInformerFactory(extClient, 0)
	crds := crdInformers.Apiextensions().V1().CustomResourceDefinitions()
	// The CRDs as the root space has them: with CRDs stored per space,
	// its own and those it serves everywhere.
	var spaceCRDs *spaceCRDCache
	if s.cfg.Options.CRDsPerSpace {
		if spaceCRDs, err = newSpaceCRDCache(loopback); err != nil {
			return err
		}
	} else if err := crds.Informer().AddIndexers(cache.Indexers{crdsBySpace: crdSpaces}); err != nil {
		return err
	}
	legacy := &legacyDiscovery{groups: s.core.DiscoveryGroupManager, crds: crds.Lister()}
	if err := legacy.register(crds.Informer()); err != nil {
		return err
	}
	crdInformers.Start(ctx.Done())

	if !cache.WaitForCacheSync(ctx.Done(), spaceInformer.Informer().HasSynced) {
		return errors.New("space cache did not sync")
	}
	if !cache.WaitForCacheSync(ctx.Done(), quotaInformer.HasSynced) {
		return errors.New("SpaceQuota cache did not sync")
	}
	s.cfg.spaces.lister.Store(&spaceLister{spaceInformer.Lister()})
	go s.cfg.quotas.forgetDeleted(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), crds.Informer().HasSynced) {
		return errors.New("CRD cache did not sync")
	}
	// The index first: what waits for the lister reads the index too.
	crdIndexer := crds.Informer().GetIndexer()
	if spaceCRDs != nil {
		if err := s.spaceCRDsSynced(ctx, spaceCRDs); err != nil {
			return err
		}
		crdIndexer = spaceCRDs.indexer
		// The dashboard reads the mailboxes' copies of each space's own
		// custom resources by definition, for the server's life.
		if err := s.dashboard.ReadByDefinition(controllerDefinitions{spaceCRDs.forTerm()}); err != nil {
			return err
		}
	}
	s.cfg.crds.bySpace.Store(&crdIndexer)
	crdLister := crds.Lister()
	s.cfg.crds.lister.Store(&crdLister)

	// Each space's admission policies (and their type checks) and
	// ResourceQuotas: which spaces have any.
	if err := s.cfg.policies.Start(ctx, clients); err != nil {
		return err
	}
	if err := s.cfg.resourceQuotas.Start(ctx, clients); err != nil {
		return err
	}
	if err := s.cfg.typeChecks.Start(ctx, clients); err != nil {
		return err
	}
	s.cfg.ownerRefs.Start(clients)

	// The control loops (loops.go): every server's, then the leader's.
	deps := &loopDeps{loopback: loopback, clients: clients, root: root, rootKube: rootKube, ext: extClient,
		spaceInformer: spaceInformer.Informer(), crdInformer: crds.Informer(), spaceCRDs: spaceCRDs, purger: purger}
	if err := s.startLoops(ctx, false, deps); err != nil {
		return err
	}
	if s.cfg.Options.DatastoreEndpoint == "" {
		// SQLite in the data dir: this is the only server.
		return s.startLoops(ctx, true, deps)
	}
	// Several servers may share an external datastore: the leader's loops
	// run on the one that holds the controllers' Lease.
	go s.lead(ctx, rootKube, func(ctx context.Context) error { return s.startLoops(ctx, true, deps) })
	return nil
}

// spaceClients builds loopback clients for the inside of a space.
type spaceClients struct {
	base *rest.Config
}

func (c *spaceClients) config(space string) *rest.Config {
	cfg := rest.CopyConfig(c.base)
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + spaces.URLPath(space)
	if space == spaces.Wildcard {
		cfg.Host = strings.TrimSuffix(c.base.Host, "/") + spaces.PathPrefix + spaces.Wildcard
	}
	return cfg
}

func (c *spaceClients) Kube(space string) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.config(space))
}

func (c *spaceClients) Dynamic(space string) (dynamic.Interface, error) {
	return dynamic.NewForConfig(c.config(space))
}

func (c *spaceClients) Metadata(space string) (metadata.Interface, error) {
	return metadata.NewForConfig(c.config(space))
}

func (c *spaceClients) Discovery(space string) (discovery.DiscoveryInterface, error) {
	return discovery.NewDiscoveryClientForConfig(c.config(space))
}

// spaceLookup answers the request filter from the cache of Space objects;
// until that cache has synced, requests for spaces other than root get 503.
type spaceLookup struct {
	lister atomic.Pointer[spaceLister]
}

type spaceLister struct{ cache.GenericLister }

func (l *spaceLookup) SpacePhase(name string) (tenancyv1alpha1.SpacePhase, bool, error) {
	phase, found, err := l.field(name, "status", "phase")
	return tenancyv1alpha1.SpacePhase(phase), found, err
}

// SpaceType implements admission.SpaceTypes.
func (l *spaceLookup) SpaceType(name string) (string, bool, error) {
	return l.field(name, "spec", "type")
}

// mailboxesOf returns the names of the cached mailbox Spaces of an
// inventory space's SyncTargets.
func (l *spaceLookup) mailboxesOf(inventory string) []string {
	lister := l.lister.Load()
	if lister == nil {
		return nil
	}
	all, err := lister.List(labels.SelectorFromSet(labels.Set{edgev2alpha1.MailboxSyncTargetSpaceLabel: inventory}))
	if err != nil {
		return nil
	}
	var names []string
	for _, obj := range all {
		if m, ok := obj.(metav1.Object); ok {
			names = append(names, m.GetName())
		}
	}
	return names
}

// OwnedBy returns the names of the cached Spaces whose owner annotation
// names user.
func (l *spaceLookup) OwnedBy(user string) ([]string, error) {
	lister := l.lister.Load()
	if lister == nil {
		return nil, errors.New("the server is starting")
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var names []string
	for _, obj := range all {
		if m, ok := obj.(metav1.Object); ok && m.GetDeletionTimestamp() == nil && m.GetAnnotations()[tenancyv1alpha1.SpaceOwnerAnnotation] == user {
			names = append(names, m.GetName())
		}
	}
	return names, nil
}

// field returns a string field of a cached Space.
func (l *spaceLookup) field(name string, path ...string) (string, bool, error) {
	lister := l.lister.Load()
	if lister == nil {
		return "", false, errors.New("the server is starting")
	}
	obj, err := lister.Get(name)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return "", false, fmt.Errorf("unexpected %T in space cache", obj)
	}
	v, _, _ := unstructured.NestedString(u.Object, path...)
	return v, true, nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiserverstorage "k8s.io/apiserver/pkg/storage"

	corev1 "k8s.io/api/core/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/component-base/compatibility"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/version"
	"github.com/kubestellar/kubestellar/server/admission"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/server/authnconfig"
	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/server/fairness"
	"github.com/kubestellar/kubestellar/server/openapi"
	"github.com/kubestellar/kubestellar/server/rbac"
	"github.com/kubestellar/kubestellar/server/satoken"
	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
)

// KubernetesVersion is the Kubernetes API version the server emulates.
const KubernetesVersion = version.Kubernetes

// Config is everything the server is built from. NewConfig has side
// effects on the data directory (certificates, tokens) and starts the
// datastore; Server.Run stops it.
type Config struct {
	Options    *CompletedOptions
	CA         *certs.CA
	AdminToken string
	Datastore  *storage.Datastore

	core       *genericapiserver.RecommendedConfig
	extensions *apiextensionsapiserver.Config
	legacy     *genericapiserver.APIGroupInfo
	groups     []*genericapiserver.APIGroupInfo
	spaces     *spaceLookup
	crds       *crdIndex
	// copies writes the placement translator's copies of built-in kinds
	// in-process (storeWriter).
	copies *storeWriter
	// users decides for users (not the admins, the server or syncers).
	users *rbac.Authorizer
	// syncerConfigs tells admission what each syncer may upsync.
	syncerConfigs *syncerConfigCache
	syncers       *auth.Syncers
	// rbac holds every space's RBAC objects, for the authorizer.
	rbac *rbac.Store
	// flowcontrol writes the APF configuration (server/fairness).
	flowcontrol flowcontrolclient.FlowcontrolV1Interface
	// tunnelConditions records syncers' tunnels on their SyncTargets.
	tunnelConditions *tunnelConditions
	// objects counts what a mailbox holds, for the syncers' quota.
	objects *objectCounter
	lock    *dataDirLock
}

// Close stops the datastore and releases the data directory; Server.Run
// does this when it returns, so call it only for a Config never run.
func (c *Config) Close() {
	c.Datastore.Stop()
	c.lock.release()
}

// PKIDir is where certificates and keys are kept inside the data directory.
func PKIDir(dataDir string) string { return filepath.Join(dataDir, "pki") }

// NewConfig prepares the data directory and the datastore and configures
// the API servers.
func NewConfig(ctx context.Context, o *CompletedOptions) (_ *Config, err error) {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating --data-dir: %w", err)
	}
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.release()
		}
	}()
	ds, err := storage.Start(ctx, storage.Config{Endpoint: o.DatastoreEndpoint, DataDir: o.DataDir,
		CAFile: o.DatastoreCAFile, CertFile: o.DatastoreCertFile, KeyFile: o.DatastoreKeyFile})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			ds.Stop()
		}
	}()
	if err := ds.WaitReady(ctx, o.DatastoreEndpoint); err != nil {
		return nil, err
	}
	if o.Token != "" {
		// Servers of one cluster share the CA and the admin token.
		if err := syncIdentity(ctx, ds, o.Token, o.DataDir); err != nil {
			return nil, err
		}
	}
	ca, err := certs.EnsureCA(PKIDir(o.DataDir), "kubestellar-ca")
	if err != nil {
		return nil, fmt.Errorf("certificate authority: %w", err)
	}
	certFile, keyFile, err := certs.EnsureServingCert(PKIDir(o.DataDir), ca, servingHosts(o))
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	adminToken, err := auth.EnsureAdminToken(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}

	// Serve watches with initial events (watch-list) no more: the apiserver
	// does that initial list inside its etcd watcher, where kine's race on
	// empty lists (see spaces.Decorate's GetList) cannot be corrected.
	// Clients fall back to list-then-watch, which is corrected.
	//
	// Nor check the watch caches against the datastore every 5-7.5
	// minutes (DetectCacheInconsistency): a cache here leaves the mailbox
	// spaces out, so each check of a resource read and decoded every copy
	// of it in every mailbox only to drop them. With 300,000 copies that
	// was 5.7 s of CPU per check of ConfigMaps alone, a quarter of the
	// server's CPU while one update reached 3,000 mailboxes. (Should the
	// gate become GA and locked on, setting it fails and says so here;
	// KUBE_WATCHCACHE_CONSISTENCY_CHECKER=true still turns the check on,
	// to panic at a mismatch, for debugging.)
	//
	// Impersonation is checked by the filter Kubernetes had before
	// constrained impersonation: that one keeps its decisions for 10 s
	// keyed by the user and the request, not by the space in the context,
	// so an impersonation allowed in one's own space would be taken as
	// allowed in any other space for that long.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{
		string(genericfeatures.WatchList):                false,
		string(genericfeatures.DetectCacheInconsistency): false,
		string(genericfeatures.ConstrainedImpersonation): false,
	}); err != nil {
		return nil, fmt.Errorf("turning off watch-list, the watch caches' consistency check and constrained impersonation: %w", err)
	}
	scheme, err := builtin.NewScheme()
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	c := &Config{Options: o, CA: ca, AdminToken: adminToken, Datastore: ds, spaces: &spaceLookup{}, crds: &crdIndex{}, syncerConfigs: &syncerConfigCache{}, objects: &objectCounter{}, lock: lock}

	core := genericapiserver.NewRecommendedConfig(codecs)
	serving := genericoptions.NewSecureServingOptions().WithLoopback()
	serving.BindAddress = net.ParseIP(o.BindAddress)
	serving.BindPort = o.Port
	serving.ServerCert.CertKey = genericoptions.CertKey{CertFile: certFile, KeyFile: keyFile}
	// TLS 1.2 with forward secrecy and AEAD only, as Go's defaults for
	// TLS 1.3 are (whose suites are not configurable): no CBC, no SHA-1.
	serving.CipherSuites = tls12CipherSuites
	if err := serving.ApplyTo(&core.SecureServing, &core.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("serving on %s:%d: %w", o.BindAddress, o.Port, err)
	}
	core.SecureServing.Listener = closeLoopbackOnStop(core.SecureServing.Listener, core.LoopbackClientConfig, logger)
	tokens := &auth.Tokens{}
	tokens.Add(adminToken, auth.AdminInfo())
	// Syncer tokens work once the kubestellar-spaces hook has started their caches.
	c.syncers = auth.NewSyncers(ca.PEM)
	// ServiceAccount tokens (kubectl create token), signed with a key
	// derived from the CA's, check the ServiceAccount in its storage,
	// installed below.
	saKey, err := satoken.DeriveKey(ca.Key)
	if err != nil {
		return nil, fmt.Errorf("service account signing key: %w", err)
	}
	var serviceAccounts rest.Getter
	saTokens, err := satoken.NewAuthenticator(saKey, func(ctx context.Context, space, namespace, name string) (*corev1.ServiceAccount, error) {
		if serviceAccounts == nil {
			return nil, errors.New("the server is starting")
		}
		obj, err := serviceAccounts.Get(genericapirequest.WithNamespace(spaces.WithSpace(ctx, space), namespace), name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		sa, ok := obj.(*corev1.ServiceAccount)
		if !ok {
			return nil, fmt.Errorf("the ServiceAccount storage returned %T", obj)
		}
		return sa, nil
	})
	if err != nil {
		return nil, err
	}
	core.Authentication.APIAudiences = authenticator.Audiences{satoken.Audience}
	authenticators := []authenticator.Token{tokens, c.syncers.Tokens, saTokens}
	if o.AuthenticationConfig != "" {
		cfg, err := authnconfig.Load(o.AuthenticationConfig)
		if err != nil {
			return nil, fmt.Errorf("--authentication-config: %w", err)
		}
		external, err := authnconfig.NewAuthenticator(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("--authentication-config: %w", err)
		}
		authenticators = append(authenticators, external)
	}
	// Everyone may ask what they may do (kubectl auth can-i), as in Kubernetes.
	c.rbac = rbac.NewStore()
	spaceType := func(space string) string {
		t, _, _ := c.spaces.SpaceType(space)
		return t
	}
	users := rbac.NewAuthorizer(c.rbac, spaceType)
	c.users = users
	authz := builtin.WithSelfReviews(auth.Authorizer{SyncTargets: c.syncers.SyncTargets, Users: users})
	core.Authorization.Authorizer = authz
	core.RuleResolver = authz
	core.LongRunningFunc = withTunnelsLongRunning(core.LongRunningFunc)
	core.Authentication.Authenticator = stackReservingAuthenticator{auth.NewRequestAuthenticator(union.New(authenticators...)), core.LongRunningFunc}
	// API Priority and Fairness, configured in the root space (see
	// server/fairness), with flows told apart by space.
	loopback, err := kubernetes.NewForConfig(core.LoopbackClientConfig)
	if err != nil {
		return nil, fmt.Errorf("loopback client: %w", err)
	}
	core.SharedInformerFactory = informers.NewSharedInformerFactory(loopback, 0)
	core.MaxRequestsInFlight, core.MaxMutatingRequestsInFlight = o.MaxRequestsInFlight, o.MaxMutatingRequestsInFlight
	core.FlowControl = fairness.New(core.SharedInformerFactory, loopback.FlowcontrolV1(), o.MaxRequestsInFlight+o.MaxMutatingRequestsInFlight, spaces.SpaceOrRoot)
	c.flowcontrol = loopback.FlowcontrolV1()
	// On shutdown, end open watches within 2 s rather than wait for their
	// clients (syncers, kubectl) to drop them.
	core.ShutdownWatchTerminationGracePeriod = 2 * time.Second
	c.tunnelConditions = newTunnelConditions(o.SelfURL())
	c.tunnelConditions.cached = c.syncers.SyncTargets.Get
	core.EffectiveVersion = compatibility.NewEffectiveVersionFromString(KubernetesVersion, "", "")
	core.ExternalAddress = net.JoinHostPort(o.AdvertiseAddress, strconv.Itoa(o.Port))
	namer := openapinamer.NewDefinitionNamer(scheme, apiextensionsapiserver.Scheme)
	core.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	core.OpenAPIConfig.Info.Title = "kubestellar"
	core.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	core.OpenAPIV3Config.Info.Title = "kubestellar"
	// Built when first asked for (server/openapi.go), not as the server
	// starts.
	core.SkipOpenAPIInstallation = true
	core.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")
	// Every space shows the default ClusterRoles and ClusterRoleBindings
	// (served from code) it does not replace.
	core.RESTOptionsGetter = storage.RESTOptionsGetter{Datastore: ds, SpaceScoped: true, WatchCache: o.WatchCache, Codec: builtinCodec(codecs),
		Decorators: map[schema.GroupResource]func(apiserverstorage.Interface) apiserverstorage.Interface{
			rbacv1.Resource("clusterroles"):        c.rbac.ClusterRolesWithDefaults,
			rbacv1.Resource("clusterrolebindings"): c.rbac.ClusterRoleBindingsWithDefaults,
		}}
	core.BuildHandlerChainFunc = func(apiHandler http.Handler, gc *genericapiserver.Config) http.Handler {
		// Inside a space, the CRDs of other spaces are not there.
		inner := spaces.WithSpaceAdmission(spaces.WithCRDBindings(withResponseCompression(apiHandler), c.crds), c.spaces)
		// After authentication: a syncer's requests end with its token.
		inner = auth.WithSyncerRequests(inner, c.syncers.Requests)
		// An exec or attach through the edge proxy is a create there.
		inner = auth.WithEdgeUpgrades(inner, authz)
		// A syncer's rate and open requests are bounded (429 beyond).
		inner = auth.WithSyncerLimits(inner, auth.DefaultSyncerLimits, gc.LongRunningFunc)
		return spaces.WithSpacePath(genericapiserver.DefaultBuildHandlerChain(inner, gc))
	}

	var namespaces rest.Getter
	c.legacy, c.groups, namespaces, err = builtin.APIGroups(scheme, codecs, core.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	c.groups = append(c.groups, builtin.ReviewAPIGroup(scheme, codecs, authz, authz), builtin.WhoAmIAPIGroup(scheme, codecs))
	signer, err := satoken.NewSigner(saKey)
	if err != nil {
		return nil, err
	}
	v1 := c.legacy.VersionedResourcesStorageMap["v1"]
	if serviceAccounts, _ = v1["serviceaccounts"].(rest.Getter); serviceAccounts == nil {
		return nil, errors.New("no ServiceAccount storage to serve TokenRequests from")
	}
	v1["serviceaccounts/token"] = satoken.NewTokenREST(serviceAccounts, signer)
	isSyncer := func(u user.Info) bool {
		_, _, ok := principal.SyncTargetOf(u)
		return ok
	}
	core.AdmissionControl = k8sadmission.NewChainHandler(admission.New(namespaces), admission.NewEdge(c.spaces, c.syncerConfigs, builtin.IsBuiltInGroup, c.mailboxQuota()),
		rbac.NewAdmission(c.rbac, authz, isSyncer, rbac.SpacesBound{Max: o.SpacesPerUser, Flag: SpacesPerUserFlag, OwnedBy: c.spaces.OwnedBy}))
	if core.AdmissionControl, err = admission.WithStatusCollectorCost(core.AdmissionControl); err != nil {
		return nil, err
	}
	c.copies = newStoreWriter(scheme, core.AdmissionControl, c.spaces, core.RequestTimeout, append([]*genericapiserver.APIGroupInfo{c.legacy}, c.groups...)...)
	c.core = core

	// The apiextensions server shares the core configuration (serving,
	// authentication, admission, discovery) but stores CRDs globally and
	// custom resources per space.
	extGeneric := *core
	extGeneric.Config.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	// Requests reach it through the core server's filters, APF among
	// them; it runs no APF controller or informers of its own.
	extGeneric.Config.FlowControl, extGeneric.SharedInformerFactory = nil, nil
	extGeneric.Config.RESTOptionsGetter = storage.RESTOptionsGetter{Datastore: ds, Codec: apiextensionsCodec}
	extGeneric.Config.MergedResourceConfig = apiextensionsapiserver.DefaultAPIResourceConfigSource()
	c.extensions = &apiextensionsapiserver.Config{
		GenericConfig: &extGeneric,
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: storage.RESTOptionsGetter{Datastore: ds, SpaceScoped: true, WatchCache: o.WatchCache, Codec: customResourceCodec,
				// Everyone lists the Spaces they may see.
				Decorators: map[schema.GroupResource]func(apiserverstorage.Interface) apiserverstorage.Interface{
					tenancyv1alpha1.Resource("spaces"): func(s apiserverstorage.Interface) apiserverstorage.Interface {
						return spaces.FilterVisible(s, users.VisibleSpaces)
					}}},
			MasterCount:         1,
			ServiceResolver:     webhook.NewDefaultServiceResolver(),
			AuthResolverWrapper: webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, core.LoopbackClientConfig, nil),
		},
	}
	logger.V(2).Info("configured server", "dataDir", o.DataDir, "advertiseAddress", o.AdvertiseAddress, "port", o.Port)
	return c, nil
}

// servingHosts are the names the serving certificate covers.
func servingHosts(o *CompletedOptions) []string {
	hosts := []string{"127.0.0.1", "::1", "localhost", o.AdvertiseAddress, o.KubeconfigHost}
	if ip := net.ParseIP(o.BindAddress); ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, o.BindAddress)
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	return append(hosts, o.TLSSANs...)
}

// builtinCodec stores built-in kinds as protobuf in their served version,
// as kube-apiserver does. Objects stored as JSON by an earlier release
// are still read: the storage decoder recognizes both encodings, and an
// object is written in protobuf at its next update.
func builtinCodec(codecs serializer.CodecFactory) storage.CodecFunc {
	versions := map[schema.GroupResource]schema.GroupVersion{}
	for _, kind := range builtin.Kinds() {
		versions[kind.GroupResource()] = kind.GroupVersion()
	}
	return func(gr schema.GroupResource) (runtime.Codec, error) {
		gv, ok := versions[gr]
		if !ok {
			return nil, fmt.Errorf("no storage version for %s", gr)
		}
		codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
			StorageMediaType:  runtime.ContentTypeProtobuf,
			StorageSerializer: codecs,
			StorageVersion:    gv,
			MemoryVersion:     schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal},
		})
		return codec, err
	}
}

func apiextensionsCodec(schema.GroupResource) (runtime.Codec, error) {
	codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeJSON,
		StorageSerializer: apiextensionsapiserver.Codecs,
		StorageVersion:    apiextensionsv1.SchemeGroupVersion,
		MemoryVersion:     apiextensionsinternal.SchemeGroupVersion,
	})
	return codec, err
}

// customResourceCodec is the base codec of custom resources; the
// apiextensions server wraps it with conversion and schema handling.
func customResourceCodec(schema.GroupResource) (runtime.Codec, error) {
	return unstructured.UnstructuredJSONScheme, nil
}

// tls12CipherSuites are the TLS 1.2 suites the server offers.
var tls12CipherSuites = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}

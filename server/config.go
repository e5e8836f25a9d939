// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiserverstorage "k8s.io/apiserver/pkg/storage"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	openapibuilder "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apiextensionsfeatures "k8s.io/apiextensions-apiserver/pkg/features"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/component-base/compatibility"
	"k8s.io/klog/v2"
	openapibuilder3 "k8s.io/kube-openapi/pkg/builder3"
	openapiutil "k8s.io/kube-openapi/pkg/util"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/syncerconnected"
	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/version"
	"github.com/kubestellar/kubestellar/server/admission"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/server/authnconfig"
	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/server/customresources"
	"github.com/kubestellar/kubestellar/server/fairness"
	"github.com/kubestellar/kubestellar/server/openapi"
	"github.com/kubestellar/kubestellar/server/ownerrefs"
	"github.com/kubestellar/kubestellar/server/policies"
	"github.com/kubestellar/kubestellar/server/quota"
	"github.com/kubestellar/kubestellar/server/rbac"
	"github.com/kubestellar/kubestellar/server/resourcequota"
	"github.com/kubestellar/kubestellar/server/satoken"
	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/garbagecollector"
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
	// customResources serves custom resources by definition; made with
	// the handler chain.
	customResources *customresources.Handler
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
	// syncerConnected records syncers' tunnels on their SyncTargets.
	syncerConnected *syncerconnected.Controller
	// objects counts what a mailbox holds, for the syncers' quota.
	objects *objectCounter
	// quotas bound what each tenant space holds.
	quotas *spaceQuotas
	// policies runs each space's admission policies.
	policies *policies.Admission
	// typeChecks writes each space's ValidatingAdmissionPolicies' type
	// checks.
	typeChecks *policies.TypeChecks
	// ownerRefs guards ownerReferences with the user's rights in each
	// space.
	ownerRefs *ownerrefs.Admission
	// resourceQuotas enforces and computes each space's ResourceQuotas.
	resourceQuotas *resourcequota.Admission
	// garbage deletes, in each space, what its owners no longer hold; it
	// learns of the writes from the storage of each resource.
	garbage *garbagecollector.Collector
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
// the API servers, in named steps, each a method below: the data
// directory and datastore, the server's identity, feature gates, serving,
// authentication, authorization, fairness, storage, the handler chain,
// the APIs, admission, then the apiextensions server for CRDs.
func NewConfig(ctx context.Context, o *CompletedOptions) (_ *Config, err error) {
	c := &Config{Options: o, spaces: &spaceLookup{}, crds: &crdIndex{}, syncerConfigs: &syncerConfigCache{}, objects: &objectCounter{}, garbage: garbagecollector.New()}
	c.quotas = newSpaceQuotas(o.SpaceLimits, c.spaces, c.crds)
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	// The datastore may decide how CRDs are stored (layOutCRDs).
	if err := c.openDataDir(ctx); err != nil {
		return nil, err
	}
	c.crds.perSpace = o.CRDsPerSpace
	if o.CRDsPerSpace {
		c.garbage.ReadByDefinition()
	}
	certFile, keyFile, err := c.ensureIdentity()
	if err != nil {
		return nil, err
	}
	if err := setFeatureGates(); err != nil {
		return nil, err
	}
	scheme, err := builtin.NewScheme()
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	core := genericapiserver.NewRecommendedConfig(codecs)
	if err := c.configureServing(ctx, core, certFile, keyFile); err != nil {
		return nil, err
	}
	saKey, serviceAccounts, err := c.configureAuthentication(ctx, core)
	if err != nil {
		return nil, err
	}
	authz := c.configureAuthorization(core)
	if err := c.configureFairness(core); err != nil {
		return nil, err
	}
	c.configureVersionAndOpenAPI(core, scheme)
	if err := c.configureStorage(ctx, core, codecs); err != nil {
		return nil, err
	}
	core.BuildHandlerChainFunc = c.handlerChain(authz)
	namespaces, err := c.configureAPIs(core, scheme, codecs, authz, saKey, serviceAccounts)
	if err != nil {
		return nil, err
	}
	if err := c.configureAdmission(core, scheme, authz, namespaces); err != nil {
		return nil, err
	}
	c.core = core
	c.configureExtensions(core)
	klog.FromContext(ctx).V(2).Info("configured server", "dataDir", o.DataDir, "advertiseAddress", o.AdvertiseAddress, "port", o.Port)
	return c, nil
}

// release undoes openDataDir, for a Config that failed to be made.
func (c *Config) release() {
	if c.Datastore != nil {
		c.Datastore.Stop()
	}
	if c.lock != nil {
		c.lock.release()
	}
}

// openDataDir locks the data directory and starts the datastore; servers of
// one cluster take the CA and admin token they share from it.
func (c *Config) openDataDir(ctx context.Context) error {
	o := c.Options
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating --data-dir: %w", err)
	}
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return err
	}
	c.lock = lock
	ds, err := storage.Start(ctx, storage.Config{Endpoint: o.DatastoreEndpoint, DataDir: o.DataDir,
		CAFile: o.DatastoreCAFile, CertFile: o.DatastoreCertFile, KeyFile: o.DatastoreKeyFile})
	if err != nil {
		return err
	}
	c.Datastore = ds
	if err := ds.WaitReady(ctx, o.DatastoreEndpoint); err != nil {
		return err
	}
	if o.Token != "" {
		// Servers of one cluster share the CA and the admin token.
		if err := syncIdentity(ctx, ds, o.Token, o.DataDir); err != nil {
			return err
		}
	}
	return layOutCRDs(ctx, ds, o)
}

// layOutCRDs has the CRDs stored as the server serves them, before it
// serves anything: with --crds-per-space (the default), the CRDs stored
// once for every space they were bound to (by an earlier release, or with
// =false) are split into one per space; with =false, a datastore that
// holds CRDs per space is refused. The split needs every other server of
// the cluster stopped: asked for on the command line, it waits for that
// (the start is refused until then); by default, a datastore other
// servers still use keeps its CRDs bound, so that a rolling upgrade goes
// on, and the first start with the cluster stopped splits them.
func layOutCRDs(ctx context.Context, ds *storage.Datastore, o *CompletedOptions) error {
	cli, err := ds.Client(ctx, 30*time.Second)
	if err != nil {
		return fmt.Errorf("datastore: %w", err)
	}
	defer cli.Close()
	once, perSpace, err := storage.CRDLayout(ctx, cli)
	if err != nil {
		return err
	}
	if !o.CRDsPerSpace {
		if perSpace {
			return fmt.Errorf("the datastore holds CRDs stored per space (a server of this cluster split them): start without --%s=false", CRDsPerSpaceFlag)
		}
		return nil
	}
	if !once {
		return nil
	}
	// A server still running with CRDs bound would serve the CRDs it no
	// longer sees as gone, and its controllers purge their instances.
	others, err := liveServers(ctx, cli, o.SelfURL(), time.Now())
	if err != nil {
		return err
	}
	if len(others) > 0 {
		if o.CRDLayoutFromDatastore && !perSpace {
			klog.FromContext(ctx).Info("start-up: the datastore holds CRDs bound to spaces (one definition to a name), and other servers use it: they stay bound; the first start with every server stopped makes each space's CRDs its own (docs/guides/upgrade.md)", "servers", others)
			o.CRDsPerSpace = false
			return nil
		}
		return fmt.Errorf("storing CRDs per space (--%s) needs every server of the cluster stopped, and %s still runs on this datastore: stop it, then start each server again",
			CRDsPerSpaceFlag, strings.Join(others, ", "))
	}
	split, err := storage.SplitBoundCRDs(ctx, cli)
	if err != nil {
		return fmt.Errorf("storing CRDs per space: %w", err)
	}
	if split > 0 {
		klog.FromContext(ctx).Info("start-up: stored the CRDs of the spaces that shared them as each space's own", "crds", split)
	}
	return nil
}

// liveServers returns the other servers whose Lease says they run, read
// from the datastore (the API is not served yet).
func liveServers(ctx context.Context, kv clientv3.KV, self string, now time.Time) ([]string, error) {
	prefix := storage.KeyPrefix + storage.ResourcePrefix(coordinationv1.Resource("leases")) + "/" + spaces.Root + "/" + metav1.NamespaceSystem + "/"
	decoder := clientgoscheme.Codecs.UniversalDeserializer()
	var live []string
	err := storage.Values(ctx, kv, prefix, func(key string, value []byte) error {
		obj, _, err := decoder.Decode(value, nil, nil)
		if err != nil {
			return nil // not a Lease this can read: not a server's
		}
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Labels[syncerconnected.ServerLeaseLabel] != "true" || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == self ||
			l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			return nil
		}
		if l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).After(now) {
			live = append(live, *l.Spec.HolderIdentity)
		}
		return nil
	})
	return live, err
}

// ensureIdentity makes, or reads, the CA, the serving certificate and the
// admin token in the data directory.
func (c *Config) ensureIdentity() (certFile, keyFile string, err error) {
	dir := c.Options.DataDir
	if c.CA, err = certs.EnsureCA(PKIDir(dir), "kubestellar-ca"); err != nil {
		return "", "", fmt.Errorf("certificate authority: %w", err)
	}
	if certFile, keyFile, err = certs.EnsureServingCert(PKIDir(dir), c.CA, servingHosts(c.Options)); err != nil {
		return "", "", fmt.Errorf("serving certificate: %w", err)
	}
	if c.AdminToken, err = auth.EnsureAdminToken(dir); err != nil {
		return "", "", fmt.Errorf("admin token: %w", err)
	}
	return certFile, keyFile, nil
}

// setFeatureGates turns off what the server cannot serve correctly.
//
// Serve watches with initial events (watch-list) no more: the apiserver
// does that initial list inside its etcd watcher, where kine's race on
// empty lists (see spaces.Decorate's GetList) cannot be corrected.
// Clients fall back to list-then-watch, which is corrected.
//
// Nor check the watch caches against the datastore every 5-7.5 minutes
// (DetectCacheInconsistency): a cache here leaves the mailbox spaces out,
// so each check of a resource read and decoded every copy of it in every
// mailbox only to drop them, a large share of the server's CPU with
// hundreds of thousands of copies. (Should the gate become GA and locked
// on, setting it fails and says so here;
// KUBE_WATCHCACHE_CONSISTENCY_CHECKER=true still turns the check on, to
// panic at a mismatch, for debugging.)
//
// Nor decode a watch's events from the datastore on goroutines of their
// own (ConcurrentWatchObjectDecode, on by default since 1.37): it speeds
// the one watch of a watch cache at high event rates, but every watch
// served from the datastore (each syncer's of its mailbox, two per live
// edge) pays two goroutines for it, and one more per event: 10,000 live
// edges would hold 40,000 more goroutines, whose stacks the collector
// scans at every cycle.
//
// Impersonation is checked by the filter Kubernetes had before constrained
// impersonation: that one keeps its decisions for 10 s keyed by the user
// and the request, not by the space in the context, so an impersonation
// allowed in one's own space would be taken as allowed in any other space
// for that long.
func setFeatureGates() error {
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{
		string(genericfeatures.WatchList):                   false,
		string(genericfeatures.DetectCacheInconsistency):    false,
		string(genericfeatures.ConstrainedImpersonation):    false,
		string(genericfeatures.ConcurrentWatchObjectDecode): false,
	}); err != nil {
		return fmt.Errorf("turning off watch-list, the watch caches' consistency check, constrained impersonation and concurrent watch decoding: %w", err)
	}
	return nil
}

// configureServing listens on --bind-address:--port with the serving
// certificate, and on loopback for the server's own clients.
func (c *Config) configureServing(ctx context.Context, core *genericapiserver.RecommendedConfig, certFile, keyFile string) error {
	o := c.Options
	serving := genericoptions.NewSecureServingOptions().WithLoopback()
	serving.BindAddress = net.ParseIP(o.BindAddress)
	serving.BindPort = o.Port
	serving.ServerCert.CertKey = genericoptions.CertKey{CertFile: certFile, KeyFile: keyFile}
	// TLS 1.2 with forward secrecy and AEAD only, as Go's defaults for
	// TLS 1.3 are (whose suites are not configurable): no CBC, no SHA-1.
	serving.CipherSuites = tls12CipherSuites
	if err := serving.ApplyTo(&core.SecureServing, &core.LoopbackClientConfig); err != nil {
		return fmt.Errorf("serving on %s:%d: %w", o.BindAddress, o.Port, err)
	}
	core.SecureServing.Listener = closeLoopbackOnStop(core.SecureServing.Listener, core.LoopbackClientConfig, klog.FromContext(ctx))
	core.LongRunningFunc = withTunnelsLongRunning(core.LongRunningFunc)
	// On shutdown, end open watches within 2 s rather than wait for their
	// clients (syncers, kubectl) to drop them.
	core.ShutdownWatchTerminationGracePeriod = 2 * time.Second
	core.ExternalAddress = net.JoinHostPort(o.AdvertiseAddress, strconv.Itoa(o.Port))
	return nil
}

// lateGetter is the ServiceAccount storage, which ServiceAccount tokens are
// checked against and which exists only once the APIs are configured.
type lateGetter struct{ rest.Getter }

// configureAuthentication authenticates the admin token, syncer tokens,
// ServiceAccount tokens (kubectl create token), signed with a key derived
// from the CA's, and the issuers of --authentication-config.
func (c *Config) configureAuthentication(ctx context.Context, core *genericapiserver.RecommendedConfig) (saKey *ecdsa.PrivateKey, serviceAccounts *lateGetter, err error) {
	tokens := &auth.Tokens{}
	tokens.Add(c.AdminToken, auth.AdminInfo())
	// Syncer tokens work once the kubestellar-spaces hook has started their caches.
	c.syncers = auth.NewSyncers(c.CA.PEM)
	c.syncers.SyncTargets.Spaces = c.spaces
	if saKey, err = satoken.DeriveKey(c.CA.Key); err != nil {
		return nil, nil, fmt.Errorf("service account signing key: %w", err)
	}
	serviceAccounts = &lateGetter{}
	saTokens, err := satoken.NewAuthenticator(saKey, func(ctx context.Context, space, namespace, name string) (*corev1.ServiceAccount, error) {
		if serviceAccounts.Getter == nil {
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
		return nil, nil, err
	}
	core.Authentication.APIAudiences = authenticator.Audiences{satoken.Audience}
	authenticators := []authenticator.Token{tokens, c.syncers.Tokens, saTokens}
	if c.Options.AuthenticationConfig != "" {
		cfg, err := authnconfig.Load(c.Options.AuthenticationConfig)
		if err != nil {
			return nil, nil, fmt.Errorf("--authentication-config: %w", err)
		}
		external, err := authnconfig.NewAuthenticator(ctx, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("--authentication-config: %w", err)
		}
		authenticators = append(authenticators, external)
	}
	core.Authentication.Authenticator = stackReservingAuthenticator{auth.NewRequestAuthenticator(union.New(authenticators...)), core.LongRunningFunc}
	return saKey, serviceAccounts, nil
}

// configureAuthorization decides for the admins, the server and syncers
// (auth.Authorizer) and for users by each space's RBAC; everyone may ask
// what they may do (kubectl auth can-i), as in Kubernetes.
func (c *Config) configureAuthorization(core *genericapiserver.RecommendedConfig) builtin.SelfReviews {
	c.rbac = rbac.NewStore()
	spaceType := func(space string) string {
		t, _, _ := c.spaces.SpaceType(space)
		return t
	}
	c.users = rbac.NewAuthorizer(c.rbac, spaceType)
	authz := builtin.WithSelfReviews(auth.Authorizer{SyncTargets: c.syncers.SyncTargets, Users: c.users})
	core.Authorization.Authorizer = authz
	core.RuleResolver = authz
	return authz
}

// configureFairness sets API Priority and Fairness, configured in the
// root space (see server/fairness), with flows told apart by space.
func (c *Config) configureFairness(core *genericapiserver.RecommendedConfig) error {
	o := c.Options
	loopback, err := kubernetes.NewForConfig(core.LoopbackClientConfig)
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	core.SharedInformerFactory = informers.NewSharedInformerFactory(loopback, 0)
	core.MaxRequestsInFlight, core.MaxMutatingRequestsInFlight = o.MaxRequestsInFlight, o.MaxMutatingRequestsInFlight
	core.FlowControl = fairness.New(core.SharedInformerFactory, loopback.FlowcontrolV1(), o.MaxRequestsInFlight+o.MaxMutatingRequestsInFlight, spaces.SpaceOrRoot)
	c.flowcontrol = loopback.FlowcontrolV1()
	c.syncerConnected = syncerconnected.New(o.SelfURL(), c.syncers.SyncTargets.Get)
	c.syncers.SyncTargetHandlers = append(c.syncers.SyncTargetHandlers, c.syncerConnected.SyncTargetHandler())
	return nil
}

// stampedVersion is the server's effective version, reported at /version
// as the Kubernetes release of its libraries with this build in SemVer
// build metadata (version.Info), not the placeholders of an unstamped
// k8s.io/component-base (v0.0.0-master+$Format:%H$), which kubectl, Helm's
// kubeVersion constraints and the e2e framework cannot parse.
type stampedVersion struct {
	compatibility.EffectiveVersion
}

func (v stampedVersion) Info() *apimachineryversion.Info {
	info := version.Info()
	if ev := v.EmulationVersion(); ev != nil {
		info.EmulationMajor, info.EmulationMinor = strconv.Itoa(int(ev.Major())), strconv.Itoa(int(ev.Minor()))
	}
	if mcv := v.MinCompatibilityVersion(); mcv != nil {
		info.MinCompatibilityMajor, info.MinCompatibilityMinor = strconv.Itoa(int(mcv.Major())), strconv.Itoa(int(mcv.Minor()))
	}
	return &info
}

// configureVersionAndOpenAPI says which Kubernetes the server emulates and
// how its OpenAPI documents are built: when first asked for
// (server/openapi.go), not as the server starts.
func (c *Config) configureVersionAndOpenAPI(core *genericapiserver.RecommendedConfig, scheme *runtime.Scheme) {
	core.EffectiveVersion = stampedVersion{compatibility.NewEffectiveVersionFromString(KubernetesVersion, "", "")}
	namer := openapinamer.NewDefinitionNamer(scheme, apiextensionsapiserver.Scheme)
	core.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	core.OpenAPIConfig.Info.Title = "kubestellar"
	core.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	core.OpenAPIV3Config.Info.Title = "kubestellar"
	core.SkipOpenAPIInstallation = true
	core.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")
}

// configureStorage stores built-in kinds per space in the datastore. Every
// space shows the default ClusterRoles and ClusterRoleBindings (served
// from code) it does not replace.
func (c *Config) configureStorage(ctx context.Context, core *genericapiserver.RecommendedConfig, codecs serializer.CodecFactory) error {
	core.RESTOptionsGetter = storage.RESTOptionsGetter{Datastore: c.Datastore, SpaceScoped: true, WatchCache: c.Options.WatchCache, Codec: builtinCodec(codecs),
		Observe: c.garbage.Observe,
		Decorators: map[schema.GroupResource]func(apiserverstorage.Interface) apiserverstorage.Interface{
			rbacv1.Resource("clusterroles"):        c.rbac.ClusterRolesWithDefaults,
			rbacv1.Resource("clusterrolebindings"): c.rbac.ClusterRoleBindingsWithDefaults,
		}}
	if c.Datastore == nil {
		return nil
	}
	// The datastore's health, in /healthz, /livez and /readyz.
	check, err := c.Datastore.HealthCheck(ctx.Done())
	if err != nil {
		return err
	}
	core.AddHealthChecks(check)
	return nil
}

// handlerChain returns the server's filters around the API handler, listed
// from the innermost out: each line one filter.
func (c *Config) handlerChain(authz builtin.SelfReviews) func(http.Handler, *genericapiserver.Config) http.Handler {
	return func(apiHandler http.Handler, gc *genericapiserver.Config) http.Handler {
		// Custom resources, each by its space's definition.
		crs, err := c.newCustomResources(apiHandler, gc)
		if err != nil {
			// The upstream CRD handler behind serves them alone.
			klog.Background().Error(err, "serving custom resources by definition")
			crs = apiHandler
		}
		h := withResponseCompression(crs)
		// Inside a space, the CRDs of other spaces are not there.
		h = spaces.WithCRDBindings(h, c.crds, !c.Options.CRDsPerSpace)
		if c.Options.CRDsPerSpace {
			// And its own are, in its discovery and OpenAPI documents.
			h = customresources.WithSpaceDocuments(h, c.crds, openapibuilder.Options{
				IncludeSelectableFields: utilfeature.DefaultFeatureGate.Enabled(apiextensionsfeatures.CustomResourceFieldSelectors)})
		}
		// No space that does not exist; no writes to one being deleted;
		// reads only through the wildcard.
		h = withDefinitionReads(h, c.Options.CRDsPerSpace)
		h = spaces.WithSpaceAdmission(h, c.spaces)
		// After authentication: a syncer's requests end with its token.
		h = auth.WithSyncerRequests(h, c.syncers.Requests)
		// An exec or attach through the edge proxy is a create there.
		h = auth.WithEdgeUpgrades(h, authz)
		// A syncer's rate and open requests are bounded (429 beyond).
		h = auth.WithSyncerLimits(h, auth.DefaultSyncerLimits, gc.LongRunningFunc)
		// A tenant space's watches on this server are bounded (429 beyond).
		h = quota.WithWatchLimits(h, c.quotas.watches, c.quotas.limits.For, c.quotas.governed)
		// Kubernetes' filters: authentication, APF, impersonation,
		// authorization, timeouts. (The authenticator reserves a request's
		// stack first: stack.go.)
		h = genericapiserver.DefaultBuildHandlerChain(h, gc)
		// /spaces/NAME/... becomes the space in the request's context.
		return spaces.WithSpacePath(h)
	}
}

// configureAPIs makes the built-in API groups, the review APIs and the
// ServiceAccount TokenRequest; it returns the Namespace storage, for
// admission.
func (c *Config) configureAPIs(core *genericapiserver.RecommendedConfig, scheme *runtime.Scheme, codecs serializer.CodecFactory,
	authz builtin.SelfReviews, saKey *ecdsa.PrivateKey, serviceAccounts *lateGetter) (namespaces rest.Getter, err error) {
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
	if serviceAccounts.Getter, _ = v1["serviceaccounts"].(rest.Getter); serviceAccounts.Getter == nil {
		return nil, errors.New("no ServiceAccount storage to serve TokenRequests from")
	}
	v1["serviceaccounts/token"] = satoken.NewTokenREST(serviceAccounts.Getter, signer)
	return namespaces, nil
}

// configureAdmission chains the server's admission: the built-in checks,
// the edge's (what a syncer may write), per-space RBAC's escalation and
// ownership checks, who may change ownerReferences (server/ownerrefs),
// tenant spaces' limits (server/quota), each space's
// admission policies (server/policies) and ResourceQuotas
// (server/resourcequota, last, as in Kubernetes: what another check
// refuses uses no quota), and StatusCollectors' CEL budgets. The placement
// translator writes its copies of built-in kinds through it, in-process.
func (c *Config) configureAdmission(core *genericapiserver.RecommendedConfig, scheme *runtime.Scheme, authz builtin.SelfReviews, namespaces rest.Getter) error {
	isSyncer := func(u user.Info) bool {
		_, _, ok := principal.SyncTargetOf(u)
		return ok
	}
	c.policies = policies.New(c.spaces, authz, admission.IsServer)
	c.typeChecks = policies.NewTypeChecks(c.spaces)
	c.resourceQuotas = resourcequota.New(c.spaces, admission.IsServer)
	c.ownerRefs = ownerrefs.New(authz, admission.IsServer)
	core.AdmissionControl = k8sadmission.NewChainHandler(admission.New(namespaces), admission.NewEdge(c.spaces, c.syncerConfigs, builtin.IsBuiltInGroup, c.mailboxQuota()),
		rbac.NewAdmission(c.rbac, authz, isSyncer, rbac.SpacesBound{Max: c.Options.SpacesPerUser, Flag: SpacesPerUserFlag, OwnedBy: c.spaces.OwnedBy}),
		c.ownerRefs, c.quotas.admission(), c.policies, c.resourceQuotas)
	var err error
	if core.AdmissionControl, err = admission.WithStatusCollectorCost(core.AdmissionControl); err != nil {
		return err
	}
	c.copies = newStoreWriter(scheme, core.AdmissionControl, c.spaces, core.RequestTimeout, append([]*genericapiserver.APIGroupInfo{c.legacy}, c.groups...)...)
	return nil
}

// configureExtensions configures the apiextensions server, which shares
// the core configuration (serving, authentication, admission, discovery)
// but stores CRDs globally (per space with --crds-per-space) and custom
// resources per space.
func (c *Config) configureExtensions(core *genericapiserver.RecommendedConfig) {
	extGeneric := *core
	extGeneric.Config.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	// Requests reach it through the core server's filters, APF among
	// them; it runs no APF controller or informers of its own.
	extGeneric.Config.FlowControl, extGeneric.SharedInformerFactory = nil, nil
	extGeneric.Config.BuildHandlerChainFunc = func(h http.Handler, _ *genericapiserver.Config) http.Handler { return h }
	extGeneric.Config.RESTOptionsGetter = storage.RESTOptionsGetter{Datastore: c.Datastore, Codec: apiextensionsCodec}
	if c.Options.CRDsPerSpace {
		// Each space's CRDs its own, stored under its keys; the names
		// and groups the root space serves everywhere are the server's.
		extGeneric.Config.RESTOptionsGetter = storage.RESTOptionsGetter{Datastore: c.Datastore, Codec: apiextensionsCodec, SpaceScoped: true,
			Decorators: map[schema.GroupResource]func(apiserverstorage.Interface) apiserverstorage.Interface{
				apiextensionsv1.Resource("customresourcedefinitions"): spaces.ReserveCRDs,
			}}
	}
	extGeneric.Config.MergedResourceConfig = apiextensionsapiserver.DefaultAPIResourceConfigSource()
	c.extensions = &apiextensionsapiserver.Config{
		GenericConfig: &extGeneric,
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			// With CRDs per space, the upstream CRD handler serves nothing
			// (server/customresources does) but its finalizer's deletes of
			// a root CRD's instances, which read the root space's keys: a
			// watch cache there would hold, and decode by the root's
			// definition, every space's objects of the name.
			CRDRESTOptionsGetter: c.customResourceStorage(c.Options.WatchCache && !c.Options.CRDsPerSpace),
			MasterCount:          1,
			ServiceResolver:      webhook.NewDefaultServiceResolver(),
			AuthResolverWrapper: func(r webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver {
				return rootConversionWebhooks(c.crds)(webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, core.LoopbackClientConfig, nil)(r))
			},
		},
	}
}

// customResourceStorage stores custom resources, from a watch cache or
// not.
func (c *Config) customResourceStorage(watchCache bool) storage.RESTOptionsGetter {
	return storage.RESTOptionsGetter{Datastore: c.Datastore, SpaceScoped: true, WatchCache: watchCache, Codec: customResourceCodec,
		Observe: c.garbage.Observe,
		// Everyone lists the Spaces they may see; mailboxes are stored
		// ready; a SyncTarget is stored naming its mailbox.
		Decorators: map[schema.GroupResource]func(apiserverstorage.Interface) apiserverstorage.Interface{
			tenancyv1alpha1.Resource("spaces"): func(s apiserverstorage.Interface) apiserverstorage.Interface {
				return spaces.FilterVisible(spaces.MailboxesBornReady(s), c.users.VisibleSpaces)
			},
			edgev2alpha1.Resource("synctargets"): syncTargetsNameTheirMailboxes}}
}

// newCustomResources makes the handler of custom resources by definition,
// with the apiextensions server's settings, in front of next.
func (c *Config) newCustomResources(next http.Handler, gc *genericapiserver.Config) (http.Handler, error) {
	// What every custom resource's schema shares (ObjectMeta and the
	// like), for server-side apply: the static spec the apiextensions
	// server is installed with.
	static, err := openapibuilder3.BuildOpenAPIDefinitionsForResources(gc.OpenAPIV3Config,
		openapiutil.GetCanonicalTypeName(&apiextensionsv1.CustomResourceDefinition{}))
	if err != nil {
		return nil, err
	}
	extra := c.extensions.ExtraConfig
	cfg := customresources.Config{
		RESTOptionsGetter:   extra.CRDRESTOptionsGetter,
		Admission:           gc.AdmissionControl,
		ServiceResolver:     extra.ServiceResolver,
		AuthResolverWrapper: extra.AuthResolverWrapper,
		Authorizer:          gc.Authorization.Authorizer,
		RequestTimeout:      gc.RequestTimeout,
		MinRequestTimeout:   time.Duration(gc.MinRequestTimeout) * time.Second,
		StaticOpenAPISpec:   static,
		MaxRequestBodyBytes: gc.MaxRequestBodyBytes,
	}
	if c.Options.CRDsPerSpace {
		// A space's own definitions read its objects from the datastore:
		// a watch cache of one would hold every space's objects of the
		// resource, whatever they define it as.
		cfg.RESTOptionsGetter = c.customResourceStorage(c.Options.WatchCache)
		cfg.OwnRESTOptionsGetter = c.customResourceStorage(false)
		cfg.Everywhere = func(crd *apiextensionsv1.CustomResourceDefinition) bool {
			return spaces.ServedEverywhere(crd.Annotations)
		}
	}
	c.customResources = customresources.New(cfg, next)
	return c.customResources, nil
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

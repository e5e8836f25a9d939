// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kubestellar/kubestellar/server/authnconfig"
	"github.com/kubestellar/kubestellar/server/quota"
	"github.com/kubestellar/kubestellar/server/storage"
)

// Options are the settings of `kubestellar server start`.
type Options struct {
	// DataDir holds the whole state of the server.
	DataDir string
	// BindAddress is the address the server listens on.
	BindAddress string
	// Port is the server's one port, for clients, syncers and health.
	Port int
	// AdvertiseAddress is the address clients and edges are told to use.
	AdvertiseAddress string
	// TLSSANs are extra names and addresses for the serving certificate.
	TLSSANs []string
	// HTTPAddress, when set, is a host:port where the API is also served
	// over plain HTTP, for a TLS-terminating load balancer that does not
	// re-encrypt.
	HTTPAddress string
	// AuthenticationConfig is a Kubernetes AuthenticationConfiguration
	// file: JWT (OIDC) issuers whose tokens authenticate users.
	AuthenticationConfig string
	// DatastoreEndpoint is a kine endpoint; empty means SQLite in DataDir.
	DatastoreEndpoint string
	// TLS files for the connection to the datastore.
	DatastoreCAFile, DatastoreCertFile, DatastoreKeyFile string
	// Token is the secret the servers of one cluster share (see package
	// bootstrap); TokenFile holds it instead, keeping it out of ps.
	Token     string
	TokenFile string
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight add up to the
	// seats API Priority and Fairness shares out among its priority
	// levels, as in kube-apiserver.
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// WatchCache serves lists and watches in spaces from memory, as
	// kube-apiserver's --watch-cache does.
	WatchCache bool
	// CRDsPerSpace stores and serves each space's CRDs as its own
	// (docs/design/crds.md); off, CRDs are bound to the spaces that
	// create them, one definition to a name.
	CRDsPerSpace bool
	// CRDLayoutFromDatastore, when CRDsPerSpace was not asked for on the
	// command line, keeps a datastore's CRDs bound to spaces if it holds
	// them so (an earlier release's) while other servers use it: the
	// split into CRDs per space waits for a start with the cluster
	// stopped, rather than refuse the start of a rolling upgrade.
	CRDLayoutFromDatastore bool
	// MailboxObjectLimit bounds the objects of one resource a syncer may
	// create in its mailbox (upsynced objects and their namespaces), once
	// the mailbox holds that many; 0 turns the bound off.
	MailboxObjectLimit int
	// SpacesPerUser bounds the spaces one user (not an admin) may own
	// (create); 0 turns the bound off.
	SpacesPerUser int
	// SpaceObjectLimit, SpaceByteLimit (a quantity: 8Mi) and
	// SpaceWatchLimit bound each tenant space where no SpaceQuota does
	// (see server/quota); 0 turns a bound off.
	SpaceObjectLimit int64
	SpaceByteLimit   string
	SpaceWatchLimit  int64
	// SpaceSyncTargetLimit bounds the SyncTargets of each tenant inventory
	// space (server/quota).
	SpaceSyncTargetLimit int64
	// SpaceMailboxObjectLimit and SpaceMailboxByteLimit bound what the
	// mailboxes of each tenant inventory space's SyncTargets hold together
	// (server/quota).
	SpaceMailboxObjectLimit int64
	SpaceMailboxByteLimit   string
}

// CRDsPerSpaceFlag sets Options.CRDsPerSpace.
const CRDsPerSpaceFlag = "crds-per-space"

// SpacesPerUserFlag sets Options.SpacesPerUser.
const SpacesPerUserFlag = "--spaces-per-user"

// DefaultSpacesPerUser is SpacesPerUser's default: a team's spaces (its
// workload descriptions, inventories, experiments), while 1,000 users at
// the bound stay within what one server holds (make bench's tenants
// section measures the memory a space costs).
const DefaultSpacesPerUser = 20

// DefaultMailboxObjectLimit is MailboxObjectLimit's default: room for an
// edge's upsynced objects of a kind, and a bound on what an edge whose
// token is stolen can store at the center.
const DefaultMailboxObjectLimit = 10000

// The environment variables `server start` reads when no flag gives their
// value, as k3s reads K3S_TOKEN and K3S_DATASTORE_ENDPOINT: they keep the
// secrets out of the process list, which every user of the machine reads
// (the service's EnvironmentFile= sets them).
const (
	// TokenEnv stands for --token.
	TokenEnv = "KUBESTELLAR_TOKEN"
	// DatastoreEndpointEnv stands for --datastore-endpoint.
	DatastoreEndpointEnv = "KUBESTELLAR_DATASTORE_ENDPOINT"
)

// FromEnv fills in from getenv what no flag gave (flags win): --token, when
// neither --token nor --token-file is given, from $KUBESTELLAR_TOKEN, and
// --datastore-endpoint from $KUBESTELLAR_DATASTORE_ENDPOINT. An empty
// variable counts as unset. It returns the names of the variables it used.
func (o *Options) FromEnv(getenv func(string) string) []string {
	var used []string
	if v := getenv(TokenEnv); v != "" && o.Token == "" && o.TokenFile == "" {
		o.Token = v
		used = append(used, TokenEnv)
	}
	if v := getenv(DatastoreEndpointEnv); v != "" && o.DatastoreEndpoint == "" {
		o.DatastoreEndpoint = v
		used = append(used, DatastoreEndpointEnv)
	}
	return used
}

// DefaultDataDir is /var/lib/kubestellar for root and ~/.kubestellar for
// everyone else.
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/kubestellar"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".kubestellar")
	}
	return ".kubestellar"
}

// The default seats of API Priority and Fairness are a few per core: two
// per core for reads and one for writes (6 on 2 cores), where
// kube-apiserver has 400 and 200, sized for etcd behind many cores. One
// SQLite writer behind a few cores does only so much at once; more seats
// only make every request wait inside the server, where nothing is fair,
// rather than in APF's queues, where each space gets its share.
func defaultMaxRequestsInFlight() (reads, writes int) {
	return 2 * runtime.NumCPU(), runtime.NumCPU()
}

// NewOptions returns the default options.
func NewOptions() *Options {
	reads, writes := defaultMaxRequestsInFlight()
	return &Options{DataDir: DefaultDataDir(), BindAddress: "0.0.0.0", Port: 6443,
		MaxRequestsInFlight: reads, MaxMutatingRequestsInFlight: writes, WatchCache: true, CRDsPerSpace: true, CRDLayoutFromDatastore: true, MailboxObjectLimit: DefaultMailboxObjectLimit, SpacesPerUser: DefaultSpacesPerUser,
		SpaceObjectLimit: quota.DefaultLimits.Objects, SpaceByteLimit: resource.NewQuantity(quota.DefaultLimits.Bytes, resource.BinarySI).String(),
		SpaceWatchLimit: quota.DefaultLimits.Watches, SpaceMailboxObjectLimit: quota.DefaultLimits.MailboxObjects, SpaceSyncTargetLimit: quota.DefaultLimits.SyncTargets,
		SpaceMailboxByteLimit: resource.NewQuantity(quota.DefaultLimits.MailboxBytes, resource.BinarySI).String()}
}

// AddFlags binds the options to flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory holding the server's whole state (certificates, tokens, the SQLite datastore).")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address to listen on.")
	fs.IntVar(&o.Port, "port", o.Port, "Port to serve the API (and spaces, syncer tunnels, health) on.")
	fs.StringVar(&o.AdvertiseAddress, "advertise-address", o.AdvertiseAddress, "Address edges and clients are told to reach the server at (default: the host's primary address).")
	fs.StringSliceVar(&o.TLSSANs, "tls-san", o.TLSSANs, "Extra host name or IP address for the serving certificate (repeatable).")
	fs.StringVar(&o.HTTPAddress, "http-address", o.HTTPAddress, "Also serve the API over plain HTTP at this host:port (off by default), for a TLS-terminating load balancer that does not re-encrypt. Requests still need a bearer token; listen only where nothing but the load balancer reaches.")
	fs.StringVar(&o.AuthenticationConfig, "authentication-config", o.AuthenticationConfig, "File with a Kubernetes AuthenticationConfiguration (apiserver.config.k8s.io/v1): JWT issuers such as OIDC providers whose tokens authenticate users, with kube-apiserver's claim validation and mappings. Their users get what each space's RBAC grants.")
	fs.StringVar(&o.Token, "token", o.Token, "Secret shared by the servers of one cluster: the first server started with it stores the CA and admin token in the datastore, encrypted with a key derived from it; servers started later with the same --token and --datastore-endpoint load them. $"+TokenEnv+" when neither --token nor --token-file is given.")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "File holding --token (keeps it out of the process list).")
	fs.StringVar(&o.DatastoreEndpoint, "datastore-endpoint", o.DatastoreEndpoint, "Datastore to keep the state in, through kine: postgres://user:pw@host:5432/db (percent-encode / ? # @ % in pw), mysql://user:pw@tcp(host:3306)/db, or an etcd cluster, https://etcd1:2379,https://etcd2:2379 (default: SQLite in the data dir). $"+DatastoreEndpointEnv+" when not given: it keeps a password out of the process list.")
	fs.StringVar(&o.DatastoreCAFile, "datastore-cafile", o.DatastoreCAFile, "CA certificate file that verifies the datastore's serving certificate.")
	fs.StringVar(&o.DatastoreCertFile, "datastore-certfile", o.DatastoreCertFile, "Client certificate file for the datastore (with --datastore-keyfile).")
	fs.StringVar(&o.DatastoreKeyFile, "datastore-keyfile", o.DatastoreKeyFile, "Client key file for the datastore (with --datastore-certfile).")
	fs.IntVar(&o.MaxRequestsInFlight, "max-requests-inflight", o.MaxRequestsInFlight, "With --max-mutating-requests-inflight, the requests the server runs at once (default: 2 per core for this flag, 1 per core for the other), which API Priority and Fairness shares out among its priority levels (FlowSchemas and PriorityLevelConfigurations in the root space); more wait in its queues, fairly between spaces. The admin and the server's own controllers are exempt.")
	fs.BoolVar(&o.WatchCache, "watch-cache", o.WatchCache, "Serve lists and watches in spaces from a watch cache in memory, as kube-apiserver does: a list of 2,000 objects is several times faster than from the datastore. Mailbox spaces and the wildcard space are always served from the datastore. --watch-cache=false saves the memory of every object outside the mailboxes.")
	fs.BoolVar(&o.CRDsPerSpace, CRDsPerSpaceFlag, o.CRDsPerSpace, "Store each space's CRDs as the space's own, so that spaces define any CRD name with any definition, independently (docs/design/crds.md); =false binds them to the spaces that create them, one definition to a name. CRDs an earlier release stored bound are split into one per space that served them at the first start with no other server running on the datastore (given, the flag refuses to start until then; not given, the CRDs stay bound meanwhile); a server with =false refuses the datastore after that.")
	fs.IntVar(&o.MailboxObjectLimit, strings.TrimPrefix(MailboxObjectLimitFlag, "--"), o.MailboxObjectLimit, "The most objects of one resource a mailbox space may hold for its syncer to create another (an upsynced object, or a namespace for them), as a ResourceQuota's object count: the copies the server made count too, and it refuses only the syncer. It bounds what an edge, or whoever holds its token, stores at the center. 0 turns the bound off.")
	fs.IntVar(&o.SpacesPerUser, strings.TrimPrefix(SpacesPerUserFlag, "--"), o.SpacesPerUser, "The most spaces one user may own (create, and so be the admin of); the server's admins are not bounded. It bounds what self-service tenants cost the server. 0 turns the bound off.")
	fs.Int64Var(&o.SpaceObjectLimit, strings.TrimPrefix(quota.ObjectLimitFlag, "--"), o.SpaceObjectLimit, "The most objects a tenant space (not root, not a mailbox) may store, of every resource together, where no SpaceQuota in the root space sets it; a user's create past it is refused (403). The server, its admins and syncers are not bounded. 0 turns the bound off.")
	fs.StringVar(&o.SpaceByteLimit, strings.TrimPrefix(quota.ByteLimitFlag, "--"), o.SpaceByteLimit, "The most bytes a tenant space's objects may take in the datastore (a quantity: 8Mi, 1Gi), where no SpaceQuota sets it; a user's create or update past it is refused (403). 0 turns the bound off.")
	fs.Int64Var(&o.SpaceWatchLimit, strings.TrimPrefix(quota.WatchLimitFlag, "--"), o.SpaceWatchLimit, "The most watches the users of one tenant space may hold open on this server, where no SpaceQuota sets it; one more is answered 429. 0 turns the bound off.")
	fs.Int64Var(&o.SpaceSyncTargetLimit, strings.TrimPrefix(quota.SyncTargetLimitFlag, "--"), o.SpaceSyncTargetLimit, "The most SyncTargets a tenant inventory space may hold, where no SpaceQuota sets it: each has a mailbox space at the center, which costs the server as much memory as a space; a user's create past it is refused (403), the admins' are not. 0 turns the bound off.")
	fs.Int64Var(&o.SpaceMailboxObjectLimit, strings.TrimPrefix(quota.MailboxObjectLimitFlag, "--"), o.SpaceMailboxObjectLimit, "The most objects the mailboxes of the SyncTargets of one inventory space a user created (not an admin) may hold together, where no SpaceQuota sets it: a placement's copy past it is not written, and its EdgePlacement says MailboxLimitExceeded. It bounds what a tenant's SyncTargets multiply its workload into. 0 turns the bound off.")
	fs.StringVar(&o.SpaceMailboxByteLimit, strings.TrimPrefix(quota.MailboxByteLimitFlag, "--"), o.SpaceMailboxByteLimit, "The most bytes the mailboxes of the SyncTargets of one inventory space a user created may take in the datastore together (a quantity), where no SpaceQuota sets it; as --space-mailbox-object-limit. 0 turns the bound off.")
	fs.IntVar(&o.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", o.MaxMutatingRequestsInFlight, "See --max-requests-inflight: the two add up to API Priority and Fairness's seats.")
}

// CompletedOptions are options with every default filled in.
type CompletedOptions struct {
	Options
	// KubeconfigHost is the host clients on this machine use (admin.kubeconfig).
	KubeconfigHost string
	// SpaceLimits are the limits of a space no SpaceQuota sets.
	SpaceLimits quota.Defaults
}

// Complete fills in defaults derived from other options.
func (o *Options) Complete() (*CompletedOptions, error) {
	c := &CompletedOptions{Options: *o}
	if c.DataDir != "" {
		abs, err := filepath.Abs(c.DataDir)
		if err != nil {
			return nil, err
		}
		c.DataDir = abs
	}
	bind := net.ParseIP(c.BindAddress)
	if c.AdvertiseAddress == "" {
		switch {
		case bind != nil && !bind.IsUnspecified():
			c.AdvertiseAddress = bind.String()
		default:
			if ip, err := utilnet.ChooseHostInterface(); err == nil {
				c.AdvertiseAddress = ip.String()
			} else {
				c.AdvertiseAddress = "127.0.0.1"
			}
		}
	}
	if c.TokenFile != "" {
		if c.Token != "" {
			return nil, errors.New("--token and --token-file exclude each other: give one")
		}
		data, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		c.Token = strings.TrimSpace(string(data))
		if c.Token == "" {
			return nil, fmt.Errorf("--token-file %s is empty", c.TokenFile)
		}
	}
	c.KubeconfigHost = "127.0.0.1"
	if bind != nil && !bind.IsUnspecified() && !bind.IsLoopback() {
		c.KubeconfigHost = bind.String()
	}
	c.SpaceLimits = quota.Defaults{Objects: c.SpaceObjectLimit, Watches: c.SpaceWatchLimit, MailboxObjects: c.SpaceMailboxObjectLimit, SyncTargets: c.SpaceSyncTargetLimit}
	if bytes, err := resource.ParseQuantity(c.SpaceByteLimit); err == nil {
		c.SpaceLimits.Bytes = bytes.Value() // else Validate says what is wrong
	}
	if bytes, err := resource.ParseQuantity(c.SpaceMailboxByteLimit); err == nil {
		c.SpaceLimits.MailboxBytes = bytes.Value()
	}
	return c, nil
}

// SelfURL is where the other servers of the cluster reach this one.
func (c *CompletedOptions) SelfURL() string {
	return "https://" + net.JoinHostPort(c.AdvertiseAddress, strconv.Itoa(c.Port))
}

// Validate returns everything wrong with the options, naming the flags.
func (c *CompletedOptions) Validate() []error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	if net.ParseIP(c.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", c.BindAddress))
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d is not between 1 and 65535", c.Port))
	}
	if net.ParseIP(c.AdvertiseAddress) == nil {
		errs = append(errs, fmt.Errorf("--advertise-address %q is not an IP address", c.AdvertiseAddress))
	}
	errs = append(errs, c.validateDatastore()...)
	if c.AuthenticationConfig != "" {
		if _, err := authnconfig.Load(c.AuthenticationConfig); err != nil {
			errs = append(errs, fmt.Errorf("--authentication-config: %w", err))
		}
	}
	if c.HTTPAddress != "" {
		host, port, err := net.SplitHostPort(c.HTTPAddress)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--http-address %q: %w (want host:port, e.g. 10.0.0.5:6080)", c.HTTPAddress, err))
		case host != "" && net.ParseIP(host) == nil:
			errs = append(errs, fmt.Errorf("--http-address %q: %q is not an IP address", c.HTTPAddress, host))
		default:
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				errs = append(errs, fmt.Errorf("--http-address %q: port %q is not between 1 and 65535", c.HTTPAddress, port))
			} else if n == c.Port && (host == "" || host == c.BindAddress || net.ParseIP(c.BindAddress).IsUnspecified()) {
				errs = append(errs, fmt.Errorf("--http-address %q: port %d is the HTTPS --port", c.HTTPAddress, n))
			}
		}
	}
	if c.MaxRequestsInFlight < 1 {
		errs = append(errs, fmt.Errorf("--max-requests-inflight %d: want at least 1", c.MaxRequestsInFlight))
	}
	if c.MailboxObjectLimit < 0 {
		errs = append(errs, fmt.Errorf("%s %d: want 0 (no bound) or more", MailboxObjectLimitFlag, c.MailboxObjectLimit))
	}
	if c.SpacesPerUser < 0 {
		errs = append(errs, fmt.Errorf("%s %d: want 0 (no bound) or more", SpacesPerUserFlag, c.SpacesPerUser))
	}
	for _, l := range []struct {
		flag  string
		value int64
	}{{quota.ObjectLimitFlag, c.SpaceObjectLimit}, {quota.WatchLimitFlag, c.SpaceWatchLimit}, {quota.MailboxObjectLimitFlag, c.SpaceMailboxObjectLimit}, {quota.SyncTargetLimitFlag, c.SpaceSyncTargetLimit}} {
		if l.value < 0 {
			errs = append(errs, fmt.Errorf("%s %d: want 0 (no bound) or more", l.flag, l.value))
		}
	}
	for _, l := range []struct{ flag, value string }{{quota.ByteLimitFlag, c.SpaceByteLimit}, {quota.MailboxByteLimitFlag, c.SpaceMailboxByteLimit}} {
		if bytes, err := resource.ParseQuantity(l.value); err != nil || bytes.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s %q: want a size such as 8Mi or 1Gi, or 0 (no bound)", l.flag, l.value))
		}
	}
	if c.MaxMutatingRequestsInFlight < 1 {
		errs = append(errs, fmt.Errorf("--max-mutating-requests-inflight %d: want at least 1", c.MaxMutatingRequestsInFlight))
	}
	for _, san := range c.TLSSANs {
		if san == "" {
			errs = append(errs, errors.New("--tls-san must not be empty"))
		}
	}
	return errs
}

// validateDatastore checks the datastore's TLS files: only with an external
// datastore, the certificate and key together, each one readable.
func (c *CompletedOptions) validateDatastore() []error {
	var errs []error
	files := []struct{ flag, path string }{
		{"--datastore-cafile", c.DatastoreCAFile}, {"--datastore-certfile", c.DatastoreCertFile}, {"--datastore-keyfile", c.DatastoreKeyFile},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if c.DatastoreEndpoint == "" || strings.HasPrefix(c.DatastoreEndpoint, "sqlite://") {
			errs = append(errs, fmt.Errorf("%s is for an external datastore: set --datastore-endpoint too", f.flag))
		}
		if _, err := os.ReadFile(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
		}
	}
	if err := storage.CheckEndpoint(c.DatastoreEndpoint); err != nil {
		errs = append(errs, fmt.Errorf("--datastore-endpoint: %w", err))
	}
	if (c.DatastoreCertFile == "") != (c.DatastoreKeyFile == "") {
		errs = append(errs, errors.New("--datastore-certfile and --datastore-keyfile go together"))
	}
	return errs
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"bufio"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Konnectivity (sigs.k8s.io/apiserver-network-proxy): the reverse tunnel
// kube-apiserver uses to reach nodes behind NAT, for comparing kubestellar's
// tunnel with the field's reference on the same edge cluster. Its
// proxy-server and proxy-agent are built from the module beside the tools
// module, test/edgecluster/konnectivity, which pins their version.

// EnvKonnectivityDir overrides where the konnectivity module is found; by
// default it is beside the tools module.
const EnvKonnectivityDir = "KUBESTELLAR_EDGECLUSTER_KONNECTIVITY_DIR"

// The file names of konnectivity's commands in a binaries directory.
const (
	KonnectivityServerBinary = "proxy-server"
	KonnectivityAgentBinary  = "proxy-agent"
)

const (
	// konnectivityRecipe changes whenever the way konnectivity is built
	// changes.
	konnectivityRecipe     = "edgecluster-konnectivity-recipe-1"
	konnectivityModulePath = "github.com/kubestellar/kubestellar/test/edgecluster/konnectivity"
	konnectivityVersions   = "KONNECTIVITY-VERSIONS.json"
)

// KonnectivityBuild is a built proxy-server and proxy-agent.
type KonnectivityBuild struct {
	Server, Agent string
	// Version is sigs.k8s.io/apiserver-network-proxy's, when recorded.
	Version string `json:"apiserver-network-proxy"`
}

// EnsureKonnectivity returns konnectivity's proxy-server and proxy-agent,
// building them first if this machine has not built them yet (a few
// minutes; cached like the cluster's binaries, under their own key).
func EnsureKonnectivity(ctx context.Context, logf Logf) (*KonnectivityBuild, error) {
	return BuildOptions{Logf: logf}.EnsureKonnectivity(ctx)
}

// EnsureKonnectivity is the package's EnsureKonnectivity with explicit
// options.
func (o BuildOptions) EnsureKonnectivity(ctx context.Context) (*KonnectivityBuild, error) {
	dir, err := o.ensureToolModule(ctx, toolModule{
		what: "konnectivity", envDir: EnvKonnectivityDir, dirName: "konnectivity", modulePath: konnectivityModulePath,
		recipe: konnectivityRecipe, cachePrefix: "konnectivity-", note: " (a few minutes cold)",
		commands: map[string]string{
			KonnectivityServerBinary: "sigs.k8s.io/apiserver-network-proxy/cmd/server",
			KonnectivityAgentBinary:  "sigs.k8s.io/apiserver-network-proxy/cmd/agent",
		},
		versions:     map[string]string{"apiserver-network-proxy": "sigs.k8s.io/apiserver-network-proxy"},
		versionsFile: konnectivityVersions,
		buildHint:    "build them with `go run ./test/edgecluster/cmd/edge-cluster -build-konnectivity` and copy them there",
	})
	if err != nil {
		return nil, err
	}
	b := &KonnectivityBuild{}
	if data, err := os.ReadFile(filepath.Join(dir, konnectivityVersions)); err == nil {
		_ = json.Unmarshal(data, b)
	}
	b.Server, b.Agent = filepath.Join(dir, KonnectivityServerBinary), filepath.Join(dir, KonnectivityAgentBinary)
	return b, nil
}

// KonnectivityOptions configures StartKonnectivity.
type KonnectivityOptions struct {
	// Binaries are the proxy-server and proxy-agent to run. Default:
	// EnsureKonnectivity.
	Binaries *KonnectivityBuild
	// Dir holds their socket, certificates and logs; it must exist.
	Dir string
	// Logf receives progress lines. Nil discards them.
	Logf Logf
	// StartTimeout bounds the start. Default 1 minute.
	StartTimeout time.Duration
}

// Konnectivity is a running proxy-server with one proxy-agent connected,
// set up as kube-apiserver uses them: the server's front end is HTTP
// CONNECT on a unix socket beside its client, and the agent opens its
// connection to the server (gRPC over mutual TLS) and dials what the
// server is asked to reach.
type Konnectivity struct {
	// Socket is the server's front end.
	Socket string
	// ServerLog and AgentLog are their logs.
	ServerLog, AgentLog string

	server, agent *process
	stopOnce      sync.Once
	stopErr       error
}

// StartKonnectivity starts a proxy-server and a proxy-agent on loopback and
// returns once the agent is connected. The caller must Stop them.
func StartKonnectivity(ctx context.Context, opts KonnectivityOptions) (_ *Konnectivity, err error) {
	if opts.Logf == nil {
		opts.Logf = discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("edgecluster: StartKonnectivity needs a Dir")
	}
	if opts.Binaries == nil {
		if opts.Binaries, err = EnsureKonnectivity(ctx, opts.Logf); err != nil {
			return nil, err
		}
	}
	certs, err := konnectivityCerts(filepath.Join(opts.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	// proxy-server refuses ports outside 1024-49151, where Linux's
	// ephemeral range (and so freePorts) often lands.
	ports, err := freePortsIn(5, 20000, 32000)
	if err != nil {
		return nil, err
	}
	agentPort, serverAdmin, serverHealth, agentAdmin, agentHealth := ports[0], ports[1], ports[2], ports[3], ports[4]
	k := &Konnectivity{Socket: filepath.Join(opts.Dir, "konnectivity.sock"),
		ServerLog: filepath.Join(opts.Dir, "proxy-server.log"), AgentLog: filepath.Join(opts.Dir, "proxy-agent.log")}
	port := strconv.Itoa
	if k.server, err = startProcess("proxy-server", k.ServerLog, os.Environ(), opts.Binaries.Server,
		"--mode=http-connect", "--server-port=0", "--uds-name="+k.Socket, "--delete-existing-uds-file",
		"--agent-bind-address=127.0.0.1", "--agent-port="+port(agentPort),
		"--cluster-cert="+certs.serverCert, "--cluster-key="+certs.serverKey, "--cluster-ca-cert="+certs.ca,
		"--admin-bind-address=127.0.0.1", "--admin-port="+port(serverAdmin),
		"--health-bind-address=127.0.0.1", "--health-port="+port(serverHealth),
		"--server-count=1", "--v=0"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = k.Stop()
		}
	}()
	if k.agent, err = startProcess("proxy-agent", k.AgentLog, os.Environ(), opts.Binaries.Agent,
		"--proxy-server-host=127.0.0.1", "--proxy-server-port="+port(agentPort),
		"--ca-cert="+certs.ca, "--agent-cert="+certs.agentCert, "--agent-key="+certs.agentKey,
		"--admin-bind-address=127.0.0.1", "--admin-server-port="+port(agentAdmin),
		"--health-server-host=127.0.0.1", "--health-server-port="+port(agentHealth),
		"--v=0"); err != nil {
		return nil, err
	}
	// The server is ready once an agent is connected to it.
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	readyz := "http://127.0.0.1:" + port(serverHealth) + "/readyz"
	var last error
	for {
		for _, p := range []*process{k.server, k.agent} {
			if p.exited() {
				return nil, fmt.Errorf("%w; see %s, which ends with:\n%s", p.exitError(), p.logPath, logTail(p.logPath, 20))
			}
		}
		if last = httpOK(ctx, readyz); last == nil {
			opts.Logf("edgecluster: konnectivity %s ready, front end %s", opts.Binaries.Version, k.Socket)
			return k, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("konnectivity's server had no agent within %s (last: %v); see %s and %s, which end with:\n%s\n%s",
				opts.StartTimeout, last, k.ServerLog, k.AgentLog, logTail(k.ServerLog, 10), logTail(k.AgentLog, 10))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// httpOK GETs url and wants 200.
func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// DialContext opens a connection to address (host:port, as the agent
// reaches it) through the tunnel: an HTTP CONNECT on the server's socket,
// as kube-apiserver's egress selector does. Give it to a rest.Config's
// Dial: TLS and HTTP/2 then run end to end, through the tunnel.
func (k *Konnectivity) DialContext(ctx context.Context, _, address string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", k.Socket)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", address, address); err != nil {
		conn.Close()
		return nil, err
	}
	// The answer is all the server sends before the target speaks, which
	// it does only once the client has: nothing is left buffered.
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("konnectivity CONNECT %s: %w", address, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("konnectivity CONNECT %s: %s", address, resp.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// PIDs are the server's and the agent's process ids, by name.
func (k *Konnectivity) PIDs() map[string]int {
	return map[string]int{"proxy-server": k.server.pid(), "proxy-agent": k.agent.pid()}
}

// Stop stops the agent, then the server, and waits for them. It returns
// an error if either had exited before. Calling it again returns the first
// result.
func (k *Konnectivity) Stop() error {
	k.stopOnce.Do(func() {
		for _, p := range []*process{k.agent, k.server} {
			if p == nil {
				continue
			}
			if p.exited() {
				if k.stopErr == nil {
					k.stopErr = fmt.Errorf("%s had exited: %w; see %s", p.name, p.exitError(), p.logPath)
				}
				continue
			}
			if p == k.agent {
				// The agent's first SIGTERM only drains it (it waits for
				// the kubelet's SIGKILL); a second ends it. Two sent at
				// once are one: send them until it is gone.
				for range 10 {
					if p.exited() || signalGroup(p.pid(), syscall.SIGTERM) != nil {
						break
					}
					select {
					case <-p.done:
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
			if _, err := p.stop(10 * time.Second); err != nil && k.stopErr == nil {
				k.stopErr = err
			}
		}
	})
	return k.stopErr
}

// konnectivityPKI is a CA, the proxy-server's certificate for its agent
// port on 127.0.0.1, and the agent's client certificate, as files.
type konnectivityPKI struct {
	ca, serverCert, serverKey, agentCert, agentKey string
}

func konnectivityCerts(dir string) (*konnectivityPKI, error) {
	p := &pki{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, caPEM, caKeyPEM, err := newCA("konnectivity-ca")
	if err != nil {
		return nil, err
	}
	out := &konnectivityPKI{}
	if out.ca, _, err = p.write("ca", caPEM, caKeyPEM); err != nil {
		return nil, err
	}
	serverCert, serverKey, err := issue(ca, x509.Certificate{
		Subject:     pkix.Name{CommonName: "konnectivity-server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		return nil, err
	}
	if out.serverCert, out.serverKey, err = p.write("server", serverCert, serverKey); err != nil {
		return nil, err
	}
	agentCert, agentKey, err := issue(ca, x509.Certificate{
		Subject:     pkix.Name{CommonName: "konnectivity-agent"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	if out.agentCert, out.agentKey, err = p.write("agent", agentCert, agentKey); err != nil {
		return nil, err
	}
	return out, nil
}

// freePortsIn picks n distinct free TCP ports on 127.0.0.1 in [lo, hi), by
// binding them all at once and closing them.
func freePortsIn(n, lo, hi int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 200 {
			return nil, fmt.Errorf("no %d free ports between %d and %d on 127.0.0.1 in 200 tries", n, lo, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo))))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

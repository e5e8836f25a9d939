// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// The network of these tests, made of namespaces joined by veth pairs:
//
//	root (the test, kubectl, edge clusters, syncers)  .1
//	  |  10.213.K.0/30
//	proxy (squid :3128, nginx :8443 :8444; no ip_forward)  .2 | .5
//	  |  10.213.K.4/30
//	center (kubestellar server start :6443, HTTP :6080)    .6
//
// K is picked per run. The root namespace reaches the center only through
// squid (HTTP CONNECT) or nginx (TLS terminated, then re-encrypted to :6443
// on :8443, plain HTTP to the server's --http-address :6080 on :8444); an
// unreachable route keeps packets for the center's /30 from leaving the
// machine by the default route.

const (
	// centerName is a DNS name on the server's certificate, for nginx to
	// verify the upstream by: nginx 1.22 checks proxy_ssl_name against DNS
	// names only, never against IP addresses.
	centerName     = "center.kubestellar.test"
	centerPort     = 6443
	centerHTTPPort = 6080
	squidPort      = 3128
	lbPort         = 8443
	lbPlainPort    = 8444
)

// syncerConnected prints a SyncTarget's SyncerConnected status and reason.
const syncerConnected = `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status} {.status.conditions[?(@.type=="SyncerConnected")].reason}`

// netLab is the network, the server in "center", squid and nginx in
// "proxy", and a client for each way in.
type netLab struct {
	subnet                      string // 10.213.K
	rootIP, proxyIP, centerIP   string
	proxy, center               *harness.Netns
	srv                         *harness.NetnsProcess
	squid, nginx                *harness.Daemon
	lbDir                       string
	proxyURL, centerURL, lbURL  string
	lbPlainURL                  string
	viaProxy, viaLB, viaLBPlain client
	squidAccessLog, nginxAccess string
	nginxPlainAccess            string
}

// TestNetworkProxyAndLoadBalancer: syncers and clients that reach the
// center only through an HTTP CONNECT proxy (squid) or a TLS-terminating
// load balancer (nginx, re-encrypting or not) work as they do with a direct
// connection, and their tunnels come back after the proxy, the load
// balancer or the server restarts.
func TestNetworkProxyAndLoadBalancer(t *testing.T) {
	lab := startNetLab(t)

	// One edge cluster per way in; each SyncTarget is made through the way
	// its syncer will use, with the URL that reaches the center from there.
	edge1 := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	edge2 := edgecluster.Start(t, edgecluster.Options{Name: "edge2"})
	edge3 := edgecluster.Start(t, edgecluster.Options{Name: "edge3"})
	join1 := lab.viaProxy.join(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod,via=proxy", "--server", lab.centerURL)
	require.Equal(t, lab.centerURL, flagValue(t, join1, "--server"))
	join2 := lab.viaLB.join(t, "edge2", "--inventory-space", "inv1", "--labels", "env=prod,via=lb", "--server", lab.lbURL)
	require.Equal(t, lab.lbURL, flagValue(t, join2, "--server"))
	syncer1 := harness.StartSyncer(t, join1, edge1.KubeconfigPath, "", "--proxy", lab.proxyURL)
	syncer2 := harness.StartSyncer(t, join2, edge2.KubeconfigPath, "") // no proxy: the load balancer is its only way
	join3 := lab.viaLBPlain.join(t, "edge3", "--inventory-space", "inv1", "--labels", "env=prod,via=lb-plain", "--server", lab.lbPlainURL)
	syncer3 := harness.StartSyncer(t, join3, edge3.KubeconfigPath, "")

	proxyOK := t.Run("Proxy", func(t *testing.T) {
		lab.scenario(t, lab.viaProxy, "edge1", edge1, syncer1, "proxy", lab.centerURL)
		// CONNECT carries the syncer's TLS, and so its HTTP/2, end to end.
		require.Contains(t, syncer1.Log(), "stream=true", "through a CONNECT proxy the tunnel is a stream of the API connection")
	})
	lbOK := t.Run("LoadBalancer", func(t *testing.T) {
		lab.scenario(t, lab.viaLB, "edge2", edge2, syncer2, "lb", lab.lbURL)
		// nginx speaks HTTP/1.1 on both sides here: a WebSocket.
		require.Contains(t, syncer2.Log(), "it is a WebSocket of its own", "behind an HTTP/1.1 balancer the tunnel is a WebSocket")
		lab.bearerTokensThroughLB(t, join2)
	})
	plainOK := t.Run("LoadBalancerPlainHTTP", func(t *testing.T) {
		lab.scenario(t, lab.viaLBPlain, "edge3", edge3, syncer3, "lb-plain", lab.lbPlainURL)
	})
	t.Run("Restarts", func(t *testing.T) {
		if !proxyOK || !lbOK || !plainOK {
			t.Skip("needs every syncer working, which the subtests above did not show")
		}
		syncers := []edgeSyncer{{"edge1", syncer1, "squid"}, {"edge2", syncer2, "nginx"}, {"edge3", syncer3, "nginx, plain HTTP to the server"}}
		lab.restartSquid(t, syncer1, syncer2)
		lab.restartNginx(t, syncer1, syncers[1:])
		lab.restartServer(t, syncers)
	})
}

// startNetLab builds the network, starts the server, squid and nginx, and
// makes the inventory and WDS spaces through the proxy.
func startNetLab(t *testing.T) *netLab {
	harness.RequireNetns(t)
	for _, tool := range []string{"squid", "nginx"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install squid nginx (apt-get install -y squid nginx)", tool)
		}
	}
	// Whatever proxy the machine has must not carry the test's traffic: the
	// syncer through the load balancer in particular has no proxy.
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(v, "")
	}

	lab := &netLab{subnet: harness.FreeSubnet(t)}
	lab.rootIP, lab.proxyIP, lab.centerIP = lab.subnet+".1", lab.subnet+".2", lab.subnet+".6"
	lab.proxy = harness.NewNetns(t, "proxy")
	lab.center = harness.NewNetns(t, "center")
	harness.Veth(t, nil, lab.rootIP+"/30", lab.proxy, lab.proxyIP+"/30")
	harness.Veth(t, lab.proxy, lab.subnet+".5/30", lab.center, lab.centerIP+"/30")
	lab.proxy.SetSysctl(t, "net/ipv4/ip_forward", "0") // the proxy namespace does not route
	harness.UnreachableRoute(t, lab.subnet+".4/30")
	t.Logf("network: root %s, proxy %s and %s.5, center %s", lab.rootIP, lab.proxyIP, lab.subnet, lab.centerIP)

	lab.srv = harness.StartBinaryInNetns(t, lab.center, "", lab.centerIP, centerPort,
		"--tls-san", lab.centerIP, "--tls-san", centerName, "--http-address", net.JoinHostPort(lab.centerIP, strconv.Itoa(centerHTTPPort)))
	lab.centerURL = lab.srv.BaseURL()
	lab.proxyURL = fmt.Sprintf("http://%s:%d", lab.proxyIP, squidPort)
	lab.lbURL = fmt.Sprintf("https://%s:%d", lab.proxyIP, lbPort)
	lab.lbPlainURL = fmt.Sprintf("https://%s:%d", lab.proxyIP, lbPlainPort)
	cfg, err := clientcmd.LoadFromFile(lab.srv.Kubeconfig)
	require.NoError(t, err)
	require.Equal(t, lab.centerURL, cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server,
		"the admin kubeconfig of a server bound to %s", lab.centerIP)

	// The root namespace has no way to the center but the proxy namespace,
	// which reaches it.
	dialCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dialCtx, "tcp", net.JoinHostPort(lab.centerIP, strconv.Itoa(centerPort)))
	if err == nil {
		conn.Close()
		t.Fatalf("the root namespace reached %s directly", lab.centerURL)
	}
	require.True(t, errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH),
		"dialing %s from the root namespace should fail for want of a route, not: %v", lab.centerURL, err)
	require.Equal(t, "ok", lab.proxy.Run(t, "kubectl", "--kubeconfig", lab.srv.Kubeconfig, "get", "--raw", "/readyz"),
		"the server, asked from the proxy namespace")

	lab.startSquid(t)
	lab.startNginx(t)

	lab.viaProxy = client{kubeconfig: lab.srv.Kubeconfig, proxy: lab.proxyURL}
	lab.viaProxy.kubestellar(t, "space", "create", "inv1", "--type", "inventory")
	lab.viaProxy.kubestellar(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")

	lab.viaLB = client{kubeconfig: lab.kubeconfigVia(t, lab.lbURL, "lb")}
	lab.viaLBPlain = client{kubeconfig: lab.kubeconfigVia(t, lab.lbPlainURL, "lb-plain")}
	// The plain-HTTP port serves only with a bearer token, as the other.
	out, err := lab.proxy.Command("kubectl", "--kubeconfig", "/dev/null", "--server", fmt.Sprintf("http://%s:%d", lab.centerIP, centerHTTPPort),
		"--token", "abcdef.0000000000000000", "get", "--raw", "/api").CombinedOutput()
	require.Error(t, err, "a bad token through the plain-HTTP port: %s", out)
	require.Contains(t, string(out), "Unauthorized")
	return lab
}

// kubeconfigVia writes the admin kubeconfig (contexts for root, inv1 and
// wds1) pointed at url instead of the center.
func (lab *netLab) kubeconfigVia(t *testing.T, url, name string) string {
	cfg, err := clientcmd.LoadFromFile(lab.srv.Kubeconfig)
	require.NoError(t, err)
	for clusterName, cluster := range cfg.Clusters {
		rest, ok := strings.CutPrefix(cluster.Server, lab.centerURL)
		require.True(t, ok, "cluster %s of the admin kubeconfig is at %s", clusterName, cluster.Server)
		cluster.Server = url + rest
	}
	path := filepath.Join(lab.lbDir, "admin-via-"+name+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// startSquid runs squid in the proxy namespace, allowing CONNECT to the
// center's port only, as the unprivileged user squid itself would switch
// to (so that it dies with the test process: switching users clears the
// parent-death signal).
func (lab *netLab) startSquid(t *testing.T) {
	squidUser, err := user.Lookup("proxy") // Debian's squid runs as proxy
	require.NoError(t, err, "the squid package's user")
	uid, _ := strconv.Atoi(squidUser.Uid)
	gid, _ := strconv.Atoi(squidUser.Gid)
	dir := harness.OpenTempDir(t, "squid", uid, gid)
	lab.squidAccessLog = filepath.Join(dir, "access.log")
	conf := fmt.Sprintf(`# squid for %s: CONNECT to the center, nothing else.
http_port %s:%d
visible_hostname kse2e-proxy
pid_filename %[4]s/squid.pid
cache_log %[4]s/cache.log
logformat kse2e %%ts.%%03tu %%>a:%%>p %%Ss/%%03>Hs %%rm %%ru %%<st
access_log stdio:%[5]s kse2e
coredump_dir %[4]s
cache deny all
cache_mem 8 MB
pinger_enable off
shutdown_lifetime 1 seconds
acl center dst %[6]s/32
acl center_port port %[7]d
acl CONNECT method CONNECT
http_access allow CONNECT center center_port
http_access deny all
`, t.Name(), lab.proxyIP, squidPort, dir, lab.squidAccessLog, lab.centerIP, centerPort)
	confPath := filepath.Join(dir, "squid.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o644))
	lab.squid = lab.proxy.StartDaemon(t, filepath.Join(dir, "squid.out"),
		"setpriv", "--reuid", squidUser.Username, "--regid", strconv.Itoa(gid), "--init-groups", "--pdeathsig", "KILL", "--",
		"squid", "-N", "-f", confPath)
	lab.squid.Name = "squid"
	lab.waitSquid(t)
}

func (lab *netLab) waitSquid(t *testing.T) {
	t.Helper()
	harness.WaitListening(t, net.JoinHostPort(lab.proxyIP, strconv.Itoa(squidPort)), lab.squid, time.Minute)
}

// startNginx runs nginx in the proxy namespace as a TLS-terminating load
// balancer in front of the center, with a serving certificate of the
// center's CA: a syncer trusts only the CA its token pins.
func (lab *netLab) startNginx(t *testing.T) {
	lab.lbDir = t.TempDir()
	pki := filepath.Join(lab.srv.DataDir, "pki")
	harness.IssueCert(t, pki, lab.lbDir, "lb", x509.ExtKeyUsageServerAuth, lab.proxyIP)
	lab.nginxAccess = filepath.Join(lab.lbDir, "access.log")
	lab.nginxPlainAccess = filepath.Join(lab.lbDir, "access-plain.log")
	// What both server blocks pass on: the tunnel is a WebSocket; it and
	// watches live long.
	const passOn = `proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
      proxy_send_timeout 1h;
      client_max_body_size 0;`
	conf := fmt.Sprintf(`# nginx for %s: TLS in; TLS to the center on one port, plain HTTP on the other.
daemon off;
# One process, which keeps root and so the parent-death signal: it dies
# with the test process.
master_process off;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log info;
events { worker_connections 4096; }
http {
  access_log %[3]s;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  map $http_upgrade $connection_upgrade {
    default upgrade;
    ''      close;
  }
  server {
    listen %[4]s:%[5]d ssl;
    ssl_certificate %[2]s/lb.crt;
    ssl_certificate_key %[2]s/lb.key;
    location / {
      proxy_pass https://%[6]s:%[7]d;
      proxy_ssl_trusted_certificate %[8]s;
      proxy_ssl_verify on;
      proxy_ssl_name %[9]s;
      proxy_ssl_server_name on;
      %[10]s
    }
  }
  server {
    listen %[4]s:%[11]d ssl;
    ssl_certificate %[2]s/lb.crt;
    ssl_certificate_key %[2]s/lb.key;
    access_log %[12]s;
    location / {
      proxy_pass http://%[6]s:%[13]d;
      %[10]s
    }
  }
}
`, t.Name(), lab.lbDir, lab.nginxAccess, lab.proxyIP, lbPort, lab.centerIP, centerPort,
		filepath.Join(pki, certs.CACertFile), centerName, passOn, lbPlainPort, lab.nginxPlainAccess, centerHTTPPort)
	confPath := filepath.Join(lab.lbDir, "nginx.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o644))
	lab.nginx = lab.proxy.StartDaemon(t, filepath.Join(lab.lbDir, "nginx.out"),
		"nginx", "-p", lab.lbDir, "-e", filepath.Join(lab.lbDir, "error.log"), "-c", confPath)
	lab.waitNginx(t)
}

func (lab *netLab) waitNginx(t *testing.T) {
	t.Helper()
	for _, port := range []int{lbPort, lbPlainPort} {
		harness.WaitListening(t, net.JoinHostPort(lab.proxyIP, strconv.Itoa(port)), lab.nginx, time.Minute)
	}
}

// scenario places a Deployment on one edge through one way in (c) and
// checks that it runs there, that its status comes back to the WDS, and
// that the edge's API is reachable through the center and the tunnel.
func (lab *netLab) scenario(t *testing.T, c client, name string, edge *edgecluster.Cluster, syncer *harness.Syncer, via, serverURL string) {
	ek := harness.Kubectl{Kubeconfig: edge.KubeconfigPath}
	ns := "via-" + via
	syncer.WaitLog(t, "tunnel open", time.Minute)
	require.Contains(t, syncer.Log(), "connected to "+serverURL+" as SyncTarget inv1/"+name)

	manifest := filepath.Join(t.TempDir(), "workload.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: v1
kind: Namespace
metadata: {name: `+ns+`}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: `+ns+`}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: `+ns+`}
spec:
  locationSelectors: [{matchLabels: {via: `+via+`}}]
  wantSingletonReportedState: true
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [`+ns+`]}
  - {apiGroup: apps, resources: [deployments], namespaces: [`+ns+`]}
`), 0o600))
	c.kubectl(t, "--context", "wds1", "apply", "-f", manifest)

	poll(t, ek, equals("2"), "the Deployment to be available at "+name,
		"get", "deployment", "web", "-n", ns, "-o", "jsonpath={.status.availableReplicas}")
	c.poll(t, equals("2 1"), "the Deployment's status from "+name+" in the WDS",
		"--context", "wds1", "get", "deployment", "web", "-n", ns,
		"-o", `jsonpath={.status.availableReplicas} {.metadata.labels.kubestellar\.io/executing-count}`)
	c.poll(t, equals("True TunnelOpen"), name+"'s SyncerConnected", "--context", "inv1", "get", "synctarget", name, "-o", syncerConnected)

	// The edge's API through the center and the tunnel, by the same way in.
	viaCenter := client{kubeconfig: filepath.Join(t.TempDir(), name+".kubeconfig"), proxy: c.proxy}
	edgeKubeconfig := c.kubestellar(t, "kubeconfig", "--edge", name, "--inventory-space", "inv1")
	require.NoError(t, os.WriteFile(viaCenter.kubeconfig, []byte(edgeKubeconfig), 0o600))
	edgeCfg, err := clientcmd.Load([]byte(edgeKubeconfig))
	require.NoError(t, err)
	for _, cluster := range edgeCfg.Clusters {
		require.True(t, strings.HasPrefix(cluster.Server, serverURL+"/"), "the edge kubeconfig's server %s", cluster.Server)
	}
	pods := viaCenter.poll(t, func(s string) bool { return strings.Count(s, ns+"/web-") == 2 }, "the edge's pods through the center",
		"get", "pods", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}`)
	require.Equal(t, ek.MustRun(t, "get", "pods", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}`), pods)

	lines := viaCenter.watch(t, "get", "configmaps", "-n", ns, "--watch", "-o", "name")
	expectLine(t, lines, "configmap/kube-root-ca.crt")
	ek.MustRun(t, "create", "configmap", "seen-through-the-"+via, "-n", ns)
	expectLine(t, lines, "configmap/seen-through-the-"+via)
}

// bearerTokensThroughLB: the load balancer passes each client's bearer
// token through, so identity and authorization are the server's: a
// syncer's token reads its own mailbox space and nothing else.
func (lab *netLab) bearerTokensThroughLB(t *testing.T, join []string) {
	mailbox := lab.viaLB.kubectl(t, "--context", "inv1", "get", "synctarget", "edge2", "-o", "jsonpath={.status.mailboxSpace}")
	require.NotEmpty(t, mailbox)
	token := strings.SplitN(flagValue(t, join, "--token"), "::", 2)[1]
	asSyncer := func(space string, args ...string) []string {
		return append([]string{"--server", lab.lbURL + "/spaces/" + space, "--token", token}, args...)
	}
	require.Contains(t, lab.viaLB.kubectl(t, asSyncer(mailbox, "get", "deployments", "-n", "via-lb", "-o", "name")...), "deployment.apps/web")
	require.Contains(t, lab.viaLB.kubectlFails(t, asSyncer("wds1", "get", "deployments", "-n", "via-lb")...), "Forbidden")
	require.Contains(t, lab.viaLB.kubectlFails(t, "--server", lab.lbURL+"/spaces/wds1", "--token", "abcdef.0000000000000000", "get", "namespaces"), "Unauthorized")

	// And the paths of spaces arrive as they were sent.
	access := readFile(t, lab.nginxAccess)
	require.Contains(t, access, "GET /spaces/wds1/apis/apps/v1/namespaces/via-lb/deployments/web")
	require.Contains(t, access, "GET /spaces/"+mailbox+"/apis/apps/v1/namespaces/via-lb/deployments")
}

// restartSquid stops squid until the center records that edge1's syncer
// is gone (seen through the load balancer, which the outage does not
// touch), and checks that the tunnel and the condition come back once
// squid does. squid's access log shows the syncer's CONNECTs.
func (lab *netLab) restartSquid(t *testing.T, viaProxy, viaLB *harness.Syncer) {
	ports := connectedPorts(t, viaProxy.Pid(), net.JoinHostPort(lab.proxyIP, strconv.Itoa(squidPort)))
	require.NotEmpty(t, ports, "the syncer has no connection to squid")
	opens, otherOpens := tunnelOpens(viaProxy), tunnelOpens(viaLB)
	history := lab.recordSyncerConnected(t, lab.viaLB)

	lab.squid.Stop(t) // squid logs a CONNECT when it ends, so now it logs those still open
	var fromSyncer []string
	for _, line := range strings.Split(readFile(t, lab.squidAccessLog), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[3] == "CONNECT" && f[4] == net.JoinHostPort(lab.centerIP, strconv.Itoa(centerPort)) &&
			ports[strings.TrimPrefix(f[1], lab.rootIP+":")] {
			fromSyncer = append(fromSyncer, line)
		}
	}
	require.NotEmpty(t, fromSyncer, "no CONNECT from the syncer's connections (ports %v) in squid's access log:\n%s", ports, readFile(t, lab.squidAccessLog))
	t.Logf("squid's log of the syncer's connections:\n%s", strings.Join(fromSyncer, "\n"))

	down := lab.viaLB.poll(t, func(s string) bool { return strings.HasPrefix(s, "False ") }, "edge1's SyncerConnected to show the proxy's outage",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", syncerConnected)
	t.Logf("with squid down, edge1's SyncerConnected is %q", down)

	lab.squid.Restart(t)
	lab.waitSquid(t)
	back := time.Now()
	waitTunnelOpens(t, viaProxy, opens)
	t.Logf("edge1's tunnel back %s after squid accepted connections again", time.Since(back).Round(10*time.Millisecond))
	lab.viaLB.poll(t, equals("True TunnelOpen"), "edge1's SyncerConnected after squid's restart",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", syncerConnected)
	require.Equal(t, otherOpens, tunnelOpens(viaLB), "the syncer behind the load balancer lost its tunnel when squid restarted")
	t.Logf("SyncerConnected (status/reason@lastTransitionTime) seen through the load balancer around squid's restart:\n%s", strings.Join(history(), "\n"))
}

// restartServer restarts the center on its data dir in its namespace;
// both syncers' tunnels come back, through squid and through nginx.
func (lab *netLab) restartServer(t *testing.T, syncers []edgeSyncer) {
	opens := countOpens(syncers)
	history := lab.recordSyncerConnected(t, lab.viaLB)
	stopping := time.Now()
	t.Logf("the server took %s to stop", lab.srv.Stop(t).Round(10*time.Millisecond))
	lab.srv.Restart(t)
	waitBack(t, syncers, opens, "the restarted server was ready")
	for _, s := range syncers {
		lab.viaLB.poll(t, equals("True TunnelOpen"), s.name+"'s SyncerConnected after the server's restart",
			"--context", "inv1", "get", "synctarget", s.name, "-o", syncerConnected)
	}
	states := history()
	t.Logf("SyncerConnected (status/reason@lastTransitionTime) seen through the load balancer around the restart:\n%s", strings.Join(states, "\n"))
	// The stopping server recorded its tunnels closing (a pre-shutdown hook,
	// within its budget), and the restarted one their return: True again,
	// or TunnelReopened for a close the stopping server did not write. The
	// False between may be too short to be seen, since the tunnels come
	// back before the restarted server answers reads; either way the
	// condition's transition is on record after the stop began (times are
	// kept to the second).
	for _, s := range syncers {
		at := lab.viaLB.kubectl(t, "--context", "inv1", "get", "synctarget", s.name, "-o",
			`jsonpath={.status.conditions[?(@.type=="SyncerConnected")].lastTransitionTime}`)
		transition, err := time.Parse(time.RFC3339, strings.TrimSpace(at))
		require.NoError(t, err, "%s's SyncerConnected lastTransitionTime %q", s.name, at)
		require.False(t, transition.Before(stopping.Truncate(time.Second)),
			"%s's SyncerConnected did not record the server's outage: its last transition %s is before the stop (%s)", s.name, transition, stopping.Format(time.RFC3339))
	}
	// The tunnels that ended went through nginx as WebSocket upgrades (nginx
	// logs a request when it ends), re-encrypted and in plain HTTP.
	for _, log := range []string{lab.nginxAccess, lab.nginxPlainAccess} {
		require.Contains(t, readFile(t, log), `"GET /kubestellar/v1/tunnel HTTP/1.1" 101`, "no tunnel in %s", log)
	}
}

// edgeSyncer is a syncer, its SyncTarget, and its way to the center.
type edgeSyncer struct {
	name   string
	syncer *harness.Syncer
	via    string
}

// countOpens counts each syncer's tunnel openings so far.
func countOpens(syncers []edgeSyncer) []int {
	opens := make([]int, len(syncers))
	for i, s := range syncers {
		opens[i] = tunnelOpens(s.syncer)
	}
	return opens
}

// waitBack waits for each syncer to open its tunnel again, and logs how
// long after now (when what happened) each took.
func waitBack(t *testing.T, syncers []edgeSyncer, opens []int, what string) {
	back := time.Now()
	for i, s := range syncers {
		waitTunnelOpens(t, s.syncer, opens[i])
		t.Logf("%s's tunnel (through %s) back %s after %s", s.name, s.via, time.Since(back).Round(10*time.Millisecond), what)
	}
}

// restartNginx stops the load balancer: the SyncTargets behind it show
// the outage; it starts again, and their tunnels come back. The syncer
// through squid is not disturbed.
func (lab *netLab) restartNginx(t *testing.T, viaProxy *harness.Syncer, behind []edgeSyncer) {
	opens := countOpens(behind)
	otherOpens := tunnelOpens(viaProxy)
	history := lab.recordSyncerConnected(t, lab.viaProxy)
	lab.nginx.Stop(t)
	for _, s := range behind {
		down := lab.viaProxy.poll(t, func(s string) bool { return strings.HasPrefix(s, "False ") }, s.name+"'s SyncerConnected to show the load balancer's outage",
			"--context", "inv1", "get", "synctarget", s.name, "-o", syncerConnected)
		t.Logf("with nginx down, %s's SyncerConnected is %q", s.name, down)
	}
	lab.nginx.Restart(t)
	lab.waitNginx(t)
	waitBack(t, behind, opens, "nginx accepted connections again")
	for _, s := range behind {
		lab.viaProxy.poll(t, equals("True TunnelOpen"), s.name+"'s SyncerConnected after nginx's restart",
			"--context", "inv1", "get", "synctarget", s.name, "-o", syncerConnected)
	}
	require.Equal(t, otherOpens, tunnelOpens(viaProxy), "the syncer behind squid lost its tunnel when nginx restarted")
	t.Logf("SyncerConnected (status/reason@lastTransitionTime) seen through squid around nginx's restart:\n%s", strings.Join(history(), "\n"))
}

// recordSyncerConnected polls both SyncTargets' SyncerConnected condition
// through the load balancer until the returned function is called, which
// returns each state seen (with the time since the start), in order.
func (lab *netLab) recordSyncerConnected(t *testing.T, c client) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	var states []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := ""
		for ctx.Err() == nil {
			out, errOut, err := c.run(ctx, "kubectl", "--context", "inv1", "--request-timeout", "5s", "get", "synctargets", "-o",
				`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="SyncerConnected")].status}/{.status.conditions[?(@.type=="SyncerConnected")].reason}@{.status.conditions[?(@.type=="SyncerConnected")].lastTransitionTime} {end}`)
			state := strings.TrimSpace(out)
			if err != nil {
				state = "no answer: " + firstLine(errOut)
			}
			if state != last && ctx.Err() == nil {
				states = append(states, fmt.Sprintf("%8s %s", time.Since(start).Round(10*time.Millisecond), state))
				last = state
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	stop := func() []string {
		cancel()
		<-done
		return states
	}
	t.Cleanup(func() { stop() })
	return stop
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(line) > 160 {
		line = line[:160] + "…"
	}
	return line
}

// tunnelOpens counts the times a syncer said its tunnel opened.
func tunnelOpens(s *harness.Syncer) int { return strings.Count(s.Log(), "\ntunnel open") }

func waitTunnelOpens(t *testing.T, s *harness.Syncer, before int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return tunnelOpens(s) > before, nil
	})
	require.NoError(t, err, "the tunnel did not come back; syncer log:\n%s", s.Log())
}

// connectedPorts returns the local ports of pid's established TCP
// connections to remote (IPv4 host:port).
func connectedPorts(t *testing.T, pid int, remote string) map[string]bool {
	t.Helper()
	host, portText, err := net.SplitHostPort(remote)
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	ip := net.ParseIP(host).To4()
	require.NotNil(t, ip, "%s is not IPv4", remote)
	// /proc/net/tcp writes an IPv4 address as its 32 bits in host (little
	// endian) order.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], port)

	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	table, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	require.NoError(t, err)
	ports := map[string]bool{}
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[2] != want || f[3] != "01" || !inodes[f[9]] {
			continue
		}
		_, localPort, _ := strings.Cut(f[1], ":")
		b, err := hex.DecodeString(localPort)
		require.NoError(t, err)
		ports[strconv.Itoa(int(b[0])<<8|int(b[1]))] = true
	}
	return ports
}

// client runs kubectl and kubestellar's client commands from the root
// namespace with one kubeconfig and, for the way through squid, the proxy
// in HTTPS_PROXY (client-go, so both, honour it).
type client struct {
	kubeconfig string
	proxy      string
}

func (c client) env() []string {
	env := append(os.Environ(), "KUBECONFIG="+c.kubeconfig,
		"KUBECACHEDIR="+filepath.Join(filepath.Dir(c.kubeconfig), ".kube-cache-"+filepath.Base(c.kubeconfig)))
	if c.proxy != "" {
		env = append(env, "HTTPS_PROXY="+c.proxy)
	}
	return env
}

func (c client) run(ctx context.Context, name string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func (c client) must(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := c.run(ctx, name, args...)
	require.NoError(t, err, "%s %s (proxy %q)\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), c.proxy, out, errOut)
	return out
}

func (c client) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return c.must(t, "kubectl", args...)
}

// kubectlFails runs kubectl, expects it to fail and returns its stderr.
func (c client) kubectlFails(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := c.run(ctx, "kubectl", args...)
	require.Error(t, err, "kubectl %s was expected to fail\nstdout: %s", strings.Join(args, " "), out)
	return errOut
}

// kubestellar runs the binary's client commands and returns their stdout.
func (c client) kubestellar(t *testing.T, args ...string) string {
	t.Helper()
	return c.must(t, harness.Binary(t), args...)
}

// join runs `kubestellar synctarget create` and returns the join command
// it printed, as arguments after the binary.
func (c client) join(t *testing.T, args ...string) []string {
	t.Helper()
	out := c.kubestellar(t, append([]string{"synctarget", "create"}, args...)...)
	fields := strings.Fields(out)
	require.GreaterOrEqual(t, len(fields), 3, "synctarget create printed %q", out)
	require.Equal(t, "kubestellar", fields[0], "synctarget create printed %q", out)
	return fields[1:]
}

// poll runs kubectl until its output satisfies ok, for a minute at most.
func (c client) poll(t *testing.T, ok func(string) bool, what string, args ...string) string {
	t.Helper()
	var last, lastErr string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		out, errOut, err := c.run(ctx, "kubectl", args...)
		last, lastErr = out, errOut
		return err == nil && ok(out), nil
	})
	require.NoError(t, err, "waiting for %s: kubectl %s (proxy %q)\nlast output: %s\nlast error: %s",
		what, strings.Join(args, " "), c.proxy, last, lastErr)
	return last
}

// watch runs kubectl (a --watch) until the test ends and returns its
// output lines.
func (c client) watch(t *testing.T, args ...string) <-chan string {
	t.Helper()
	return harness.StreamLines(t, c.env(), "kubectl", args...)
}

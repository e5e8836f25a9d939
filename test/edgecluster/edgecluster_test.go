// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestMain builds the cluster binaries, kine and konnectivity, if this machine has not
// built them yet, before the tests run, so that the cold build (several
// minutes) does not count against the tests' -timeout.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		if err := ensureBinariesBeforeTests(); err != nil {
			fmt.Fprintf(os.Stderr, "edgecluster tests: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

func ensureBinariesBeforeTests() error {
	started := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	type result struct {
		bins *Binaries
		err  error
	}
	done := make(chan result, 1)
	go func() {
		bins, err := EnsureBinaries(context.Background(), logf)
		if err == nil {
			_, err = EnsureKine(context.Background(), logf)
		}
		if err == nil {
			_, err = EnsureKonnectivity(context.Background(), logf)
		}
		done <- result{bins, err}
	}()
	// The go command kills a test binary that runs for more than -timeout
	// plus a minute, whatever TestMain does. Give up shortly before that,
	// with an explanation rather than a goroutine dump; the go build goes on
	// and fills the Go build cache, so the next attempt is quick.
	var expired <-chan time.Time
	if f := flag.Lookup("test.timeout"); f != nil {
		if timeout, err := time.ParseDuration(f.Value.String()); err == nil && timeout > 0 {
			expired = time.After(timeout + 30*time.Second)
		}
	}
	select {
	case r := <-done:
		if r.err != nil {
			return r.err
		}
		logf("edgecluster binaries: %s (%s)", r.bins.Dir, since(started))
		return nil
	case <-expired:
		return fmt.Errorf("the cluster binaries were still building after %s, too close to go test's -timeout; "+
			"run `make edgecluster-tools` (it shows progress and has no time limit), or pass a longer -timeout (e.g. 30m), then run the tests again",
			since(started))
	}
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
`

// TestTwoClustersAtOnce starts two clusters concurrently, runs a Deployment
// through kubectl on each, stops them and checks that nothing is left.
func TestTwoClustersAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clusters")
	}
	kubectl := kubectlPath(t)
	ctx := t.Context()
	bins, err := EnsureBinaries(ctx, t.Logf)
	require.NoError(t, err)

	names := []string{"alpha", "beta"}
	clusters := make([]*Cluster, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			clusters[i], errs[i] = StartCluster(ctx, Options{Name: name, Binaries: bins, Logf: t.Logf})
		})
	}
	wg.Wait()
	for _, c := range clusters {
		if c != nil {
			t.Cleanup(func() {
				if t.Failed() {
					c.keepDir = true
				}
				_ = c.Stop()
			})
		}
	}
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NotEqual(t, clusters[0].Config.Host, clusters[1].Config.Host)
	for _, c := range clusters {
		logMemory(t, c)
	}

	for i, c := range clusters {
		wg.Go(func() { errs[i] = exerciseDeployment(ctx, t, kubectl, c) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "cluster %s", clusters[i].Name)
	}

	for _, c := range clusters {
		pids, ports, dir := c.PIDs(), c.Ports(), c.Dir
		started := time.Now()
		require.NoError(t, c.Stop())
		t.Logf("cluster %s stopped in %s", c.Name, since(started))
		requireGone(t, pids, ports)
		_, err := os.Stat(dir)
		require.True(t, errors.Is(err, os.ErrNotExist), "cluster directory %s should be removed, stat: %v", dir, err)
	}
}

// TestStartStopsOnCleanup checks Start: the cluster works with kubectl, its
// nodes are Ready, its version is the pinned one, and the test's cleanup
// stops it.
func TestStartStopsOnCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real cluster")
	}
	kubectl := kubectlPath(t)
	var pids map[string]int
	var ports map[string]int
	t.Run("cluster", func(t *testing.T) {
		c := Start(t, Options{Name: "gamma", Nodes: 2})
		pids, ports = c.PIDs(), c.Ports()
		require.Len(t, pids, 5)
		for _, pid := range pids {
			require.True(t, processExists(pid))
		}

		out, err := runKubectl(t.Context(), kubectl, c.KubeconfigPath, nil, "get", "nodes", "-o", "name")
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"node/kwok-node-0", "node/kwok-node-1"}, strings.Fields(out))

		client, err := kubernetes.NewForConfig(c.Config)
		require.NoError(t, err)
		version, err := client.Discovery().ServerVersion()
		require.NoError(t, err)
		require.NotEmpty(t, c.binVersions().Kubernetes)
		require.Equal(t, c.binVersions().Kubernetes, version.GitVersion, "the control plane's version should be stamped at build time")
		for _, name := range c.NodeNames {
			node, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			require.NoError(t, nodeReady(node))
		}
	})
	requireGone(t, pids, ports)
}

// TestStartFailureNamesTheLog checks that a process that dies during the
// start fails it with an error naming its log, and leaves nothing running.
func TestStartFailureNamesTheLog(t *testing.T) {
	falseBin, err := exec.LookPath("false")
	require.NoError(t, err)
	bins := &Binaries{ControlPlane: falseBin, Etcd: falseBin, Kwok: falseBin, KwokStages: "/dev/null"}
	_, err = StartCluster(t.Context(), Options{Name: "broken", Binaries: bins, Logf: t.Logf, StartTimeout: 30 * time.Second})
	require.Error(t, err)
	var exit *exitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, "etcd", exit.name)
	require.Contains(t, err.Error(), "etcd.log")
	require.FileExists(t, exit.logPath, "the cluster's files should be kept after a failed start")
	require.NoError(t, os.RemoveAll(filepath.Dir(exit.logPath)))
}

func TestCacheKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("go.mod", "module "+toolsModulePath+"\n")
	write("go.sum", "a v1 h1:x\n")
	write("cmd/x/main.go", "package main\n")
	write("README.md", "notes\n")
	key := func(goVersion string) string {
		k, err := cacheKey(dir, goVersion)
		require.NoError(t, err)
		return k
	}
	base := key("go1.26.8")
	require.Len(t, base, 16)
	require.Equal(t, base, key("go1.26.8"), "the key should be stable")
	require.NotEqual(t, base, key("go1.27.0"), "the Go version should change the key")
	write("README.md", "other notes\n")
	require.Equal(t, base, key("go1.26.8"), "files that are not built should not change the key")
	write("go.sum", "a v2 h1:y\n")
	changed := key("go1.26.8")
	require.NotEqual(t, base, changed, "go.sum should change the key")
	write("cmd/x/main.go", "package main // changed\n")
	require.NotEqual(t, changed, key("go1.26.8"), "sources should change the key")

	t.Chdir(filepath.Join(dir, "cmd", "x"))
	t.Setenv(EnvToolsDir, "")
	found, err := findToolsDir()
	require.NoError(t, err)
	require.Equal(t, dir, found)
}

func TestKubeVersionLDFlags(t *testing.T) {
	flags, err := kubeVersionLDFlags("v1.37.1")
	require.NoError(t, err)
	require.Contains(t, flags, "-X k8s.io/component-base/version.gitVersion=v1.37.1")
	require.Contains(t, flags, "-X k8s.io/component-base/version.gitMajor=1")
	require.Contains(t, flags, "-X k8s.io/component-base/version.gitMinor=37")
	_, err = kubeVersionLDFlags("garbage")
	require.Error(t, err)
}

func TestLockFileExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := LockFile(t.Context(), path, "a test", t.Logf)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	_, err = LockFile(ctx, path, "a test", t.Logf)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a held lock should not be taken twice")
	unlock()
	unlock2, err := LockFile(t.Context(), path, "a test", t.Logf)
	require.NoError(t, err)
	unlock2()
}

// exerciseDeployment applies a 3-replica Deployment with kubectl, waits for
// it to be available, reads a pod's logs and runs a command in it, scales
// it to 5, and deletes it.
func exerciseDeployment(ctx context.Context, t *testing.T, kubectl string, c *Cluster) error {
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	applied := time.Now()
	if _, err := runKubectl(ctx, kubectl, c.KubeconfigPath, strings.NewReader(deployment), "apply", "-f", "-"); err != nil {
		return err
	}
	if err := waitDeployment(ctx, client, c, 3); err != nil {
		return err
	}
	t.Logf("cluster %s: 3-replica Deployment available %s after kubectl apply", c.Name, since(applied))

	// logs and exec go from kube-apiserver to kwok's kubelet API.
	line := "a line written by " + t.Name()
	if err := c.AppendPodLog(line); err != nil {
		return err
	}
	out, err := runKubectl(ctx, kubectl, c.KubeconfigPath, nil, "logs", "deployment/web")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "edgecluster "+c.Name+": container started\n"+line+"\n") {
		return fmt.Errorf("cluster %s: kubectl logs printed %q", c.Name, out)
	}
	out, err = runKubectl(ctx, kubectl, c.KubeconfigPath, nil, "exec", "deployment/web", "--", "sh", "-c", "echo $EDGECLUSTER; pwd")
	if err != nil {
		return err
	}
	if want := c.Name + "\n" + filepath.Join(c.Dir, "kwok") + "\n"; out != want {
		return fmt.Errorf("cluster %s: kubectl exec printed %q, want %q", c.Name, out, want)
	}

	scaled := time.Now()
	if _, err := runKubectl(ctx, kubectl, c.KubeconfigPath, nil, "scale", "deployment/web", "--replicas=5"); err != nil {
		return err
	}
	if err := waitDeployment(ctx, client, c, 5); err != nil {
		return err
	}
	t.Logf("cluster %s: scaled to 5 available replicas in %s", c.Name, since(scaled))

	deleted := time.Now()
	if _, err := runKubectl(ctx, kubectl, c.KubeconfigPath, nil, "delete", "deployment/web", "--wait=true"); err != nil {
		return err
	}
	if err := poll(ctx, time.Minute, "the Deployment's pods to be gone", func() error {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	t.Logf("cluster %s: Deployment and its pods deleted in %s", c.Name, since(deleted))
	return nil
}

// waitDeployment waits for the Deployment to have want available, updated
// replicas, and for its pods to be Running on the cluster's fake nodes.
func waitDeployment(ctx context.Context, client kubernetes.Interface, c *Cluster, want int32) error {
	err := poll(ctx, time.Minute, fmt.Sprintf("%d available replicas", want), func() error {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := deploymentAvailable(d, want); err != nil {
			return err
		}
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		running := 0
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp != nil {
				continue
			}
			if pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s", pod.Name, pod.Status.Phase)
			}
			if !strings.HasPrefix(pod.Spec.NodeName, "kwok-node-") {
				return fmt.Errorf("pod %s is on node %q", pod.Name, pod.Spec.NodeName)
			}
			running++
		}
		if running != int(want) {
			return fmt.Errorf("%d pods running", running)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: %w (logs: %v)", c.Name, err, c.LogFiles())
	}
	return nil
}

func deploymentAvailable(d *appsv1.Deployment, want int32) error {
	s := d.Status
	if s.ObservedGeneration < d.Generation {
		return fmt.Errorf("generation %d not observed yet", d.Generation)
	}
	if s.Replicas != want || s.UpdatedReplicas != want || s.AvailableReplicas != want {
		return fmt.Errorf("replicas %d, updated %d, available %d", s.Replicas, s.UpdatedReplicas, s.AvailableReplicas)
	}
	return nil
}

// poll calls check every 100ms until it succeeds or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %w", what, err)
		case <-tick.C:
		}
	}
}

func kubectlPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("KUBECTL")
	if path == "" {
		var err error
		path, err = exec.LookPath("kubectl")
		require.NoError(t, err, "these tests drive the clusters with the real kubectl (Debian package kubectl); set KUBECTL to its path")
	}
	out, err := exec.Command(path, "version", "--client").CombinedOutput()
	require.NoError(t, err, "%s version --client: %s", path, out)
	t.Logf("using %s: %s", path, strings.Join(strings.Fields(string(out)), " "))
	return path
}

func runKubectl(ctx context.Context, kubectl, kubeconfig string, stdin *strings.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// requireGone checks that the processes no longer exist and nothing listens
// on the ports.
func requireGone(t *testing.T, pids, ports map[string]int) {
	t.Helper()
	require.NotEmpty(t, pids)
	require.NotEmpty(t, ports)
	for name, pid := range pids {
		require.False(t, processExists(pid), "%s (pid %d) should be gone", name, pid)
	}
	for name, port := range ports {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			_ = conn.Close()
		}
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "nothing should listen on %s's port %d", name, port)
	}
}

func logMemory(t *testing.T, c *Cluster) {
	rss, err := c.ResidentMemory()
	if err != nil {
		t.Logf("cluster %s: cannot read memory use: %v", c.Name, err)
		return
	}
	var total uint64
	var parts []string
	for name, b := range rss {
		total += b
		parts = append(parts, fmt.Sprintf("%s %dMiB", name, b>>20))
	}
	t.Logf("cluster %s: resident memory %d MiB (%s)", c.Name, total>>20, strings.Join(parts, ", "))
}

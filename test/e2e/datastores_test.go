// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestExternalDatastores runs the placement scenario on two servers that
// share each external datastore kine supports, started as the user
// would: PostgreSQL, MySQL (MariaDB) and an etcd cluster that requires
// client certificates. Each time the servers share one identity, serve
// each other's writes, survive a restart, and log no password.
func TestExternalDatastores(t *testing.T) {
	for _, ds := range []struct {
		name  string
		start func(t *testing.T) (args []string, secret string, stop func())
	}{
		{"postgresql", func(t *testing.T) ([]string, string, func()) {
			pg := harness.StartPostgres(t)
			return []string{"--datastore-endpoint", pg.DSN}, pg.Password, pg.Stop
		}},
		{"mysql", func(t *testing.T) ([]string, string, func()) {
			my := harness.StartMySQL(t)
			return []string{"--datastore-endpoint", my.DSN}, my.Password, my.Stop
		}},
		{"etcd", func(t *testing.T) ([]string, string, func()) {
			e := harness.StartEtcd(t)
			return e.ServerArgs(), "", e.Stop
		}},
	} {
		t.Run(ds.name, func(t *testing.T) {
			args, secret, stopDatastore := ds.start(t)
			args = append(args, "--token", "cluster-secret")
			a := harness.StartBinary(t, "", args...)
			b := harness.StartBinary(t, "", args...)
			for _, f := range []string{"pki/ca.crt", "admin.token"} {
				require.Equal(t, readFile(t, filepath.Join(a.DataDir, f)), readFile(t, filepath.Join(b.DataDir, f)), "%s differs between the servers", f)
			}
			// The controllers run on whichever server leads; kubectl uses a.
			mb := placementScenario(t, a)
			holder := a.Kubectl().MustRun(t, "get", "lease", "-n", "kube-system", "kubestellar-controllers", "-o", "jsonpath={.spec.holderIdentity}")
			leader, _ := splitLeader(t, holder, a, b)
			t.Logf("controllers ran on the server on port %d", leader.Port)

			// b serves what the scenario wrote, with a's credentials.
			kb := a.Kubectl()
			poll(t, kb, equals("east"), "edge1's customized ConfigMap through the other server",
				"--server", b.BaseURL()+"/spaces/"+mb["edge1"], "get", "configmap", "settings", "-n", "common", "-o", "jsonpath={.data.region}")

			// Both restart on the datastore's state.
			for _, p := range []*harness.Process{a, b} {
				p.Stop(t)
				p.Restart(t, args...)
			}
			require.Equal(t, "west", a.Kubectl().MustRun(t, "--server", a.BaseURL()+"/spaces/"+mb["edge2"],
				"get", "configmap", "settings", "-n", "common", "-o", "jsonpath={.data.region}"))
			poll(t, a.Kubectl(), equals("True"), "the common placement to stay Ready after the restart",
				"--context", "wds1", "get", "edgeplacement", "common", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)

			if ds.name == "etcd" {
				// Without its client certificate a server waits for the
				// datastore, saying why.
				etcdArgs := slices.Clone(args)
				i := slices.Index(etcdArgs, "--datastore-certfile")
				etcdArgs = slices.Delete(etcdArgs, i, i+4) // and --datastore-keyfile
				waiting := startWaiting(t, etcdArgs, "waiting for the datastore")
				require.Contains(t, waiting, "check --datastore-cafile, --datastore-certfile and --datastore-keyfile")
				require.Contains(t, waiting, "certificate required")
			}
			if secret != "" {
				for _, p := range []*harness.Process{a, b} {
					require.NotContains(t, readFile(t, p.LogPath), secret, "the datastore password is in %s", p.LogPath)
				}
			}

			// The datastore's health is in /readyz (and /healthz): a load
			// balancer in front of the servers leaves out one that has
			// lost it.
			require.Contains(t, a.Kubectl().MustRun(t, "get", "--raw", "/readyz?verbose"), "[+]etcd ok")
			stopDatastore()
			var lastErr string
			err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				_, errOut, _ := a.Kubectl().Run(ctx, "get", "--raw", "/readyz?verbose")
				lastErr = errOut
				return strings.Contains(errOut, "[-]etcd failed"), nil
			})
			require.NoError(t, err, "/readyz to say the datastore is gone; last: %s", lastErr)
		})
	}
}

// startWaiting starts a server that cannot start, waits for the log line
// that says why, and returns it; the server is killed.
func startWaiting(t *testing.T, args []string, want string) string {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	var mu sync.Mutex
	cmd := exec.CommandContext(ctx, harness.Binary(t), append([]string{"server", "start", "--data-dir", t.TempDir(),
		"--bind-address", "127.0.0.1", "--port", strconv.Itoa(harness.FreePort(t))}, args...)...)
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, &out}, lockedWriter{&mu, &out}
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	var line string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for l := range strings.Lines(out.String()) {
			if strings.Contains(l, want) {
				line = l
				return true, nil
			}
		}
		return false, nil
	})
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, err, "no %q in the server's output:\n%s", want, out.String())
	return line
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

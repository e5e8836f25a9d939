// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/test/harness"
)

// datastorePassword holds every character that cuts a URL or a DSN, between
// words that must never show; MySQL takes it as written.
const datastorePassword = "Quokka/Wombat@Numbat:Dugong?Bilby#Kakapo"

// datastorePasswordPieces are the words of datastorePassword.
var datastorePasswordPieces = []string{"Quokka", "Wombat", "Numbat", "Dugong", "Bilby", "Kakapo"}

// TestSecretsServer starts `server start` on MariaDB as a user whose
// password holds / @ : ? #, with the endpoint and the cluster token in
// $KUBESTELLAR_DATASTORE_ENDPOINT and $KUBESTELLAR_TOKEN: neither shows in
// /proc/PID/cmdline nor in the log. Then servers that cannot start (a wrong
// password, as a flag and in the environment; a PostgreSQL URL whose
// password is not percent-encoded; another cluster token) say why without
// the secret.
func TestSecretsServer(t *testing.T) {
	my := harness.StartMySQL(t)
	user := "ksecret"
	rootSQL(t, my, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'; GRANT ALL ON kubestellar.* TO '%s'@'127.0.0.1';",
		user, datastorePassword, user))
	endpoint := func(password string) string {
		return fmt.Sprintf("mysql://%s:%s@tcp(127.0.0.1:%d)/kubestellar", user, password, my.Port)
	}
	redacted := fmt.Sprintf("mysql://%s:REDACTED@tcp(127.0.0.1:%d)/kubestellar", user, my.Port)
	clusterToken := "cluster-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	secrets := append([]string{clusterToken}, datastorePasswordPieces...)

	port := harness.FreePort(t)
	srv := startSecretProcess(t, []string{"KUBESTELLAR_DATASTORE_ENDPOINT=" + endpoint(datastorePassword), "KUBESTELLAR_TOKEN=" + clusterToken},
		"server", "start", "--data-dir", t.TempDir(), "--bind-address", "127.0.0.1", "--port", strconv.Itoa(port), "-v", "4")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	require.NoError(t, harness.WaitReady(ctx, port, 2*time.Minute), "the server did not get ready; log:\n%s", srv.log())
	require.Contains(t, srv.log(), `"starting datastore" endpoint="`+redacted+`"`, "the server runs on $KUBESTELLAR_DATASTORE_ENDPOINT")
	requireNoSecrets(t, "/proc/PID/cmdline of the server", srv.cmdline(t), secrets)
	requireNoSecrets(t, "the server's log", srv.log(), secrets)

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		says []string
	}{
		{name: "another cluster token: $KUBESTELLAR_TOKEN was used",
			env:  []string{"KUBESTELLAR_DATASTORE_ENDPOINT=" + endpoint(datastorePassword), "KUBESTELLAR_TOKEN=another-token"},
			says: []string{"the datastore holds the identity of a cluster started with another --token"}},
		{name: "a wrong password in the environment",
			env:  []string{"KUBESTELLAR_DATASTORE_ENDPOINT=" + endpoint("Tuatara/Pukeko@Takahe:Kereru?Kokako#Hihi")},
			says: []string{"starting datastore " + redacted, "Access denied for user 'ksecret'"}},
		{name: "a wrong password as a flag",
			args: []string{"--datastore-endpoint", endpoint("Tuatara/Pukeko@Takahe:Kereru?Kokako#Hihi")},
			says: []string{"the datastore password is on the command line", "starting datastore " + redacted, "Access denied for user 'ksecret'"}},
		{name: "a PostgreSQL password not percent-encoded",
			env:  []string{"KUBESTELLAR_DATASTORE_ENDPOINT=postgres://ks:Tuatara/Pukeko@Takahe:Kereru?Kokako#Hihi@127.0.0.1:1/kubestellar"},
			says: []string{`datastore endpoint "postgres://ks:REDACTED@127.0.0.1:1/kubestellar": an @ after the host: percent-encode`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startSecretProcess(t, tc.env, append([]string{"server", "start", "--data-dir", t.TempDir(), "--bind-address", "127.0.0.1",
				"--port", strconv.Itoa(harness.FreePort(t)), "-v", "4"}, tc.args...)...)
			out := p.waitExit(t, time.Minute)
			for _, s := range tc.says {
				require.Contains(t, out, s)
			}
			requireNoSecrets(t, "the output of a server that cannot start", out, append(secrets, "another-token",
				"Tuatara", "Pukeko", "Takahe", "Kereru", "Kokako", "Hihi"))
		})
	}
}

// TestSecretsSyncer joins two edges, one with --token-file and one with
// $KUBESTELLAR_TOKEN: each connects, and its token shows neither in
// /proc/PID/cmdline nor in its log (at -v 8, which logs every request).
func TestSecretsSyncer(t *testing.T) {
	srv := harness.StartBinary(t, "")
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	edgeKubeconfig := unusedEdgeKubeconfig(t)
	for _, tc := range []struct {
		edge string
		file bool
	}{
		{edge: "edge1", file: true},
		{edge: "edge2"},
	} {
		t.Run(tc.edge, func(t *testing.T) {
			join := srv.JoinCommand(t, tc.edge, "--inventory-space", "inv1")
			token := flagValue(t, join, "--token")
			var args, env []string
			for i := 0; i < len(join); i++ {
				if join[i] == "--token" {
					i++
					continue
				}
				args = append(args, join[i])
			}
			if tc.file {
				file := filepath.Join(t.TempDir(), "token")
				require.NoError(t, os.WriteFile(file, []byte(token+"\n"), 0o600))
				args = append(args, "--token-file", file)
			} else {
				env = []string{"KUBESTELLAR_TOKEN=" + token}
			}
			p := startSecretProcess(t, env, append(args, "--kubeconfig", edgeKubeconfig, "--data-dir", t.TempDir(), "-v", "8")...)
			p.waitLog(t, " as SyncTarget inv1/"+tc.edge, time.Minute)
			// The secret half of the token (id.secret); the CA hash is public.
			_, secret, ok := strings.Cut(token, "::")
			require.True(t, ok, "token %q has no ::", token)
			requireNoSecrets(t, "/proc/PID/cmdline of the syncer", p.cmdline(t), []string{secret})
			requireNoSecrets(t, "the syncer's log", p.log(), []string{secret, strings.SplitN(secret, ".", 2)[1]})
		})
	}
}

// secretProcess is the binary run with an environment of the test's, its
// output in a file.
type secretProcess struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

func startSecretProcess(t *testing.T, env []string, args ...string) *secretProcess {
	t.Helper()
	p := &secretProcess{logPath: filepath.Join(t.TempDir(), "out.log"), exited: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	require.NoError(t, err)
	p.cmd = exec.Command(harness.Binary(t), args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
	return p
}

func (p *secretProcess) log() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

// cmdline is what ps shows for the process: /proc/PID/cmdline, whose
// arguments are NUL-separated.
func (p *secretProcess) cmdline(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
	require.NoError(t, err)
	require.NotEmpty(t, data)
	return string(bytes.ReplaceAll(data, []byte{0}, []byte{' '}))
}

// waitLog waits until the process has printed line, failing (with the log)
// after timeout or if it exits.
func (p *secretProcess) waitLog(t *testing.T, line string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-p.exited:
			return strings.Contains(p.log(), line), fmt.Errorf("the process exited")
		default:
		}
		return strings.Contains(p.log(), line), nil
	})
	require.NoError(t, err, "waiting for %q; log:\n%s", line, p.log())
}

// waitExit waits for a process that must fail by itself, and returns its
// output.
func (p *secretProcess) waitExit(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("the process did not exit within %s; log:\n%s", timeout, p.log())
	}
	require.NotZero(t, p.cmd.ProcessState.ExitCode(), "the process was expected to fail; log:\n%s", p.log())
	return p.log()
}

// requireNoSecrets fails if text, which is what, holds one of secrets.
func requireNoSecrets(t *testing.T, what, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if i := strings.Index(text, s); i >= 0 {
			from, to := max(i-200, 0), min(i+len(s)+200, len(text))
			t.Fatalf("%s holds the secret %q:\n...%s...", what, s, text[from:to])
		}
	}
}

// rootSQL runs SQL as MariaDB's root, over its socket.
func rootSQL(t *testing.T, my *harness.MySQL, sql string) {
	t.Helper()
	out, err := exec.Command("mariadb", "--no-defaults", "-S", filepath.Join(my.Dir, "mysqld.sock"), "-u", "root", "-e", sql).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

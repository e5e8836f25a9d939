// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	testBinary = "/opt/kubestellar/bin/kubestellar"
	testToken  = "K10" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
)

// fakeSystemd records the systemctl commands run, and fails those named in
// fail.
type fakeSystemd struct {
	running bool
	calls   []string
	fail    map[string]bool
}

func (f *fakeSystemd) systemd() *Systemd {
	return &Systemd{
		Running: func() bool { return f.running },
		Systemctl: func(_ context.Context, args ...string) error {
			call := strings.Join(args, " ")
			f.calls = append(f.calls, call)
			if f.fail[call] {
				return errors.New("systemctl " + call + ": exit status 1")
			}
			return nil
		},
	}
}

// testHost is a temporary root: with sd nil, a directory (as --root
// gives); otherwise a machine whose systemd is sd.
func testHost(t *testing.T, sd *fakeSystemd) (Host, *bytes.Buffer) {
	t.Helper()
	out := &bytes.Buffer{}
	h := Host{Root: t.TempDir(), Out: out}
	if sd != nil {
		h.Systemd = sd.systemd()
	}
	return h, out
}

// tree is every file and directory under root with its permissions.
func tree(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		mode := info.Mode().Perm()
		if d.IsDir() {
			mode |= fs.ModeDir
		}
		got[rel] = mode
		return nil
	}))
	return got
}

// files is tree without the directories.
func files(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	for p, m := range tree(t, root) {
		if !m.IsDir() {
			got[p] = m
		}
	}
	return got
}

func readEnvArgs(t *testing.T, h Host, p, name string) []string {
	t.Helper()
	args, err := readArgs(h, p, name)
	require.NoError(t, err)
	return args
}

func TestInstallServerFiles(t *testing.T) {
	h, out := testHost(t, nil)
	require.NoError(t, InstallServer(context.Background(), h, ServerInstall{
		Binary: testBinary, Args: []string{"--port", "7443", "--tls-san", "a.example.com,b.example.com", "--data-dir", "/x"},
	}))
	require.Equal(t, map[string]fs.FileMode{
		"etc":                                    fs.ModeDir | 0o755,
		"etc/systemd":                            fs.ModeDir | 0o755,
		"etc/systemd/system":                     fs.ModeDir | 0o755,
		"etc/systemd/system/kubestellar.service": 0o644,
		"etc/kubestellar":                        fs.ModeDir | 0o755,
		"etc/kubestellar/server.env":             0o600,
	}, tree(t, h.Root))
	unit, err := os.ReadFile(filepath.Join(h.Root, "etc/systemd/system/kubestellar.service"))
	require.NoError(t, err)
	want, err := ServerUnit(testBinary)
	require.NoError(t, err)
	require.Equal(t, want, string(unit))
	require.Equal(t, []string{"--data-dir=/x", "--port=7443", "--tls-san=a.example.com", "--tls-san=b.example.com"},
		readEnvArgs(t, h, ServerEnvFile, ServerArgsVar))
	require.Contains(t, out.String(), "systemctl not run")
	require.Contains(t, out.String(), "  systemctl enable --now kubestellar.service\n")

	require.NoError(t, UninstallServer(context.Background(), h, false))
	require.Empty(t, files(t, h.Root))
	require.NotContains(t, tree(t, h.Root), "etc/kubestellar")
}

func TestServerArgs(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	// A relative path, as a user would type it, to a file that exists.
	tokenFile, err := filepath.Rel(wd, filepath.Join(t.TempDir(), "token"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tokenFile, []byte("secret\n"), 0o600))
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    []string
		secrets []EnvVar
		fromEnv []string
		dataDir string
		err     string
	}{
		{name: "defaults", want: []string{"--data-dir=/var/lib/kubestellar"}, dataDir: "/var/lib/kubestellar"},
		{name: "relative data dir", args: []string{"--data-dir=state", "--bind-address=127.0.0.1"},
			want:    []string{"--bind-address=127.0.0.1", "--data-dir=" + filepath.Join(wd, "state")},
			dataDir: filepath.Join(wd, "state")},
		{name: "relative files", args: []string{"--token-file=" + tokenFile, "--datastore-endpoint=https://etcd:2379", "--datastore-cafile=" + tokenFile},
			want: []string{"--data-dir=/var/lib/kubestellar", "--datastore-cafile=" + filepath.Join(wd, tokenFile),
				"--token-file=" + filepath.Join(wd, tokenFile)},
			secrets: []EnvVar{{"KUBESTELLAR_DATASTORE_ENDPOINT", "https://etcd:2379"}},
			dataDir: "/var/lib/kubestellar"},
		{name: "secrets go to the environment file", args: []string{"--token=cluster-secret", "--datastore-endpoint=postgres://ks:pw@db/ks", "--port=7443"},
			want:    []string{"--data-dir=/var/lib/kubestellar", "--port=7443"},
			secrets: []EnvVar{{"KUBESTELLAR_DATASTORE_ENDPOINT", "postgres://ks:pw@db/ks"}, {"KUBESTELLAR_TOKEN", "cluster-secret"}},
			dataDir: "/var/lib/kubestellar"},
		{name: "secrets from the installer's environment", env: map[string]string{"KUBESTELLAR_TOKEN": "env-secret", "KUBESTELLAR_DATASTORE_ENDPOINT": "mysql://ks:pw@tcp(db)/ks"},
			want:    []string{"--data-dir=/var/lib/kubestellar"},
			secrets: []EnvVar{{"KUBESTELLAR_DATASTORE_ENDPOINT", "mysql://ks:pw@tcp(db)/ks"}, {"KUBESTELLAR_TOKEN", "env-secret"}},
			fromEnv: []string{"KUBESTELLAR_TOKEN", "KUBESTELLAR_DATASTORE_ENDPOINT"},
			dataDir: "/var/lib/kubestellar"},
		{name: "flags win over the environment", args: []string{"--token-file=" + tokenFile, "--datastore-endpoint=https://etcd:2379"},
			env:     map[string]string{"KUBESTELLAR_TOKEN": "env-secret", "KUBESTELLAR_DATASTORE_ENDPOINT": "mysql://ks:pw@tcp(db)/ks"},
			want:    []string{"--data-dir=/var/lib/kubestellar", "--token-file=" + filepath.Join(wd, tokenFile)},
			secrets: []EnvVar{{"KUBESTELLAR_DATASTORE_ENDPOINT", "https://etcd:2379"}},
			dataDir: "/var/lib/kubestellar"},
		{name: "--token and --token-file", args: []string{"--token=a", "--token-file=" + tokenFile}, err: "--token and --token-file exclude each other"},
		{name: "a password that kine would misread", args: []string{"--datastore-endpoint=postgres://ks:hunter2/sesame@db/ks"},
			err: `datastore endpoint "postgres://ks:REDACTED@db/ks": an @ after the host`},
		{name: "typo", args: []string{"--prot=7443"}, err: "unknown flag: --prot"},
		{name: "bad value", args: []string{"--port=http"}, err: `"--port"`},
		{name: "invalid", args: []string{"--port=70000"}, err: "--port 70000 is not between 1 and 65535"},
		{name: "not an IP", args: []string{"--bind-address=localhost"}, err: "--bind-address"},
		{name: "an argument", args: []string{"start"}, err: `"start"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, dataDir, err := ServerArgs(tc.args, func(name string) string { return tc.env[name] })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "hunter2", "errors must not show a password")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Args)
			require.Equal(t, tc.secrets, got.Secrets)
			require.Equal(t, tc.fromEnv, got.FromEnv)
			require.Equal(t, tc.dataDir, dataDir)
		})
	}
}

func TestSyncerArgs(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	base := []string{"--server=https://center:6443/", "--token=" + testToken, "--sync-target=edge1"}
	tokenFile, err := filepath.Rel(wd, filepath.Join(t.TempDir(), "token"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600))
	emptyFile := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(emptyFile, nil, 0o600))
	secret := []EnvVar{{"KUBESTELLAR_TOKEN", testToken}}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    []string
		secrets []EnvVar
		fromEnv []string
		err     string
	}{
		{name: "minimal", args: base, want: []string{"--data-dir=/var/lib/kubestellar-syncer/edge1",
			"--server=https://center:6443", "--sync-target=edge1"}, secrets: secret},
		{name: "relative paths made absolute", args: append([]string{"--kubeconfig=rel/kc", "--data-dir=d", "--heartbeat-interval=30s"}, base...),
			want: []string{"--data-dir=" + filepath.Join(wd, "d"), "--heartbeat-interval=30s", "--kubeconfig=" + filepath.Join(wd, "rel/kc"),
				"--server=https://center:6443", "--sync-target=edge1"}, secrets: secret},
		{name: "token file recorded, absolute", args: []string{"--server=https://center:6443", "--token-file=" + tokenFile, "--sync-target=edge1"},
			env: map[string]string{"KUBESTELLAR_TOKEN": "ignored"},
			want: []string{"--data-dir=/var/lib/kubestellar-syncer/edge1", "--server=https://center:6443", "--sync-target=edge1",
				"--token-file=" + filepath.Join(wd, tokenFile)}},
		{name: "token from the installer's environment", args: []string{"--server=https://center:6443", "--sync-target=edge1"},
			env:     map[string]string{"KUBESTELLAR_TOKEN": testToken},
			want:    []string{"--data-dir=/var/lib/kubestellar-syncer/edge1", "--server=https://center:6443", "--sync-target=edge1"},
			secrets: secret, fromEnv: []string{"KUBESTELLAR_TOKEN"}},
		{name: "--token and --token-file", args: append([]string{"--token-file=" + tokenFile}, base...), err: "--token and --token-file exclude each other"},
		{name: "empty token file", args: []string{"--server=https://c:6443", "--token-file=" + emptyFile, "--sync-target=edge1"},
			err: "--token-file " + emptyFile + " is empty"},
		{name: "missing token file", args: []string{"--server=https://c:6443", "--token-file=/nonexistent/token", "--sync-target=edge1"},
			err: "--token-file: open /nonexistent/token"},
		{name: "typo", args: append([]string{"--sync-targt=x"}, base...), err: "unknown flag: --sync-targt"},
		{name: "no server", args: base[1:], err: "--server is required"},
		{name: "bad token", args: []string{"--server=https://c:6443", "--token=nope", "--sync-target=e"}, err: "--token"},
		{name: "bad name", args: []string{"--server=https://c:6443", "--token=" + testToken, "--sync-target=Edge_1"}, err: "--sync-target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, name, err := SyncerArgs(tc.args, func(name string) string { return tc.env[name] })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "0123456789abcdef", "errors must not show the token")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Args)
			require.Equal(t, tc.secrets, got.Secrets)
			require.Equal(t, tc.fromEnv, got.FromEnv)
			require.Equal(t, "edge1", name)
		})
	}
}

func TestInstallFailsBeforeWritingAnything(t *testing.T) {
	sd := &fakeSystemd{running: true}
	h, _ := testHost(t, sd)
	require.ErrorContains(t, InstallServer(context.Background(), h, ServerInstall{Binary: testBinary, Args: []string{"--prot", "1"}}), "--prot")
	require.ErrorContains(t, InstallSyncer(context.Background(), h, SyncerInstall{Binary: testBinary, Args: []string{"--server=https://c:6443"}}), "--token")
	require.ErrorContains(t, InstallServer(context.Background(), h, ServerInstall{Binary: "kubestellar"}), "not absolute")
	require.Empty(t, tree(t, h.Root))
	require.Empty(t, sd.calls)
}

func TestInstallRunsSystemctl(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool
		noStart bool
		syncer  bool
		calls   []string
		says    string
	}{
		{name: "server", running: true, calls: []string{"daemon-reload", "enable --now kubestellar.service"}, says: "is running"},
		{name: "server no start", running: true, noStart: true, calls: []string{"daemon-reload"}, says: "not started (--no-start)"},
		{name: "server without systemd", says: "systemd is not running here"},
		{name: "syncer", running: true, syncer: true,
			calls: []string{"daemon-reload", "enable --no-block --now kubestellar-syncer@edge1.service"}, says: "is starting"},
		{name: "syncer no start", running: true, noStart: true, syncer: true, calls: []string{"daemon-reload"}, says: "not started (--no-start)"},
		{name: "syncer without systemd", syncer: true, says: "  systemctl enable --no-block --now kubestellar-syncer@edge1.service\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd := &fakeSystemd{running: tc.running}
			h, out := testHost(t, sd)
			var err error
			if tc.syncer {
				err = InstallSyncer(context.Background(), h, SyncerInstall{Binary: testBinary, NoStart: tc.noStart,
					Args: []string{"--server=https://center:6443", "--token=" + testToken, "--sync-target=edge1", "--kubeconfig=/etc/edge.kubeconfig"}})
			} else {
				err = InstallServer(context.Background(), h, ServerInstall{Binary: testBinary, NoStart: tc.noStart})
			}
			require.NoError(t, err)
			require.Equal(t, tc.calls, sd.calls)
			require.Contains(t, out.String(), tc.says)
			require.NotContains(t, out.String(), "0123456789abcdef", "the token is not printed")
		})
	}
}

func TestReinstallWithOtherFlagsRestarts(t *testing.T) {
	sd := &fakeSystemd{running: true}
	h, _ := testHost(t, sd)
	install := func(args ...string) {
		require.NoError(t, InstallServer(context.Background(), h, ServerInstall{Binary: testBinary, Args: args}))
	}
	install("--port=7443")
	install("--port=7443")
	install("--port=8443")
	require.Equal(t, []string{
		"daemon-reload", "enable --now kubestellar.service",
		"daemon-reload", "enable --now kubestellar.service",
		"daemon-reload", "enable kubestellar.service", "restart kubestellar.service",
	}, sd.calls)
}

func TestUninstallServer(t *testing.T) {
	sd := &fakeSystemd{running: true}
	h, out := testHost(t, sd)
	dataDir := filepath.Join(h.Root, "srv/ks")
	require.NoError(t, os.MkdirAll(filepath.Join(dataDir, "db"), 0o700))
	require.NoError(t, InstallServer(context.Background(), h, ServerInstall{Binary: testBinary, Args: []string{"--data-dir=/srv/ks"}}))
	sd.calls = nil

	require.NoError(t, UninstallServer(context.Background(), h, true))
	require.Equal(t, []string{"disable --now kubestellar.service", "daemon-reload"}, sd.calls)
	require.Empty(t, files(t, h.Root))
	require.NoDirExists(t, dataDir)
	require.NoDirExists(t, filepath.Join(h.Root, "etc/kubestellar"))
	require.Contains(t, out.String(), "removed "+dataDir)

	// Again: nothing left to stop or remove, and no error.
	sd.calls = nil
	out.Reset()
	require.NoError(t, UninstallServer(context.Background(), h, false))
	require.Empty(t, sd.calls)
	require.Contains(t, out.String(), "was not installed")
}

func TestUninstallServerKeepsOtherFiles(t *testing.T) {
	h, _ := testHost(t, nil)
	require.NoError(t, InstallServer(context.Background(), h, ServerInstall{Binary: testBinary}))
	require.NoError(t, InstallSyncer(context.Background(), h, SyncerInstall{Binary: testBinary,
		Args: []string{"--server=https://center:6443", "--token=" + testToken, "--sync-target=edge1", "--kubeconfig=/k"}}))
	require.NoError(t, UninstallServer(context.Background(), h, false))
	require.Equal(t, map[string]fs.FileMode{
		"etc/systemd/system/kubestellar-syncer@.service": 0o644,
		"etc/kubestellar/syncer-edge1.env":               0o600,
	}, files(t, h.Root))
}

func TestUninstallPurgeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		err  string
	}{
		{name: "root directory", env: `KUBESTELLAR_ARGS="--data-dir=/"`, err: `refusing to purge the data dir "/"`},
		{name: "root directory, spelt otherwise", env: `KUBESTELLAR_ARGS="--data-dir=//."`, err: "refusing to purge"},
		{name: "empty", env: `KUBESTELLAR_ARGS="--data-dir="`, err: `refusing to purge the data dir ""`},
		{name: "relative", env: `KUBESTELLAR_ARGS="--data-dir=var/lib/x"`, err: "refusing to purge"},
		{name: "unreadable flags", env: `KUBESTELLAR_ARGS="--no-such-flag"`, err: "cannot tell which data dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd := &fakeSystemd{running: true}
			h, _ := testHost(t, sd)
			require.NoError(t, InstallServer(context.Background(), h, ServerInstall{Binary: testBinary, NoStart: true}))
			require.NoError(t, os.WriteFile(filepath.Join(h.Root, ServerEnvFile), []byte(tc.env+"\n"), 0o600))
			sd.calls = nil
			before := tree(t, h.Root)

			require.ErrorContains(t, UninstallServer(context.Background(), h, true), tc.err)
			require.Equal(t, before, tree(t, h.Root), "a refused purge changes nothing")
			require.Empty(t, sd.calls)
		})
	}
	require.ErrorContains(t, checkPurgeable("  "), "refusing")
}

func TestUninstallSyncer(t *testing.T) {
	sd := &fakeSystemd{running: true}
	h, out := testHost(t, sd)
	for _, name := range []string{"edge1", "edge2"} {
		require.NoError(t, InstallSyncer(context.Background(), h, SyncerInstall{Binary: testBinary,
			Args: []string{"--server=https://center:6443", "--token=" + testToken, "--sync-target=" + name, "--kubeconfig=/k"}}))
	}
	dataDir := filepath.Join(h.Root, "var/lib/kubestellar-syncer/edge1")
	require.NoError(t, os.MkdirAll(dataDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "state.json"), []byte("{}"), 0o600))
	sd.calls = nil

	// The template stays while another syncer uses it.
	require.NoError(t, UninstallSyncer(context.Background(), h, "edge1", true))
	require.Equal(t, []string{"disable --now kubestellar-syncer@edge1.service"}, sd.calls)
	require.Equal(t, map[string]fs.FileMode{
		"etc/systemd/system/kubestellar-syncer@.service": 0o644,
		"etc/kubestellar/syncer-edge2.env":               0o600,
	}, files(t, h.Root))
	require.NoDirExists(t, dataDir)
	require.Contains(t, out.String(), "keeping")

	sd.calls = nil
	require.NoError(t, UninstallSyncer(context.Background(), h, "edge2", false))
	require.Equal(t, []string{"disable --now kubestellar-syncer@edge2.service", "daemon-reload"}, sd.calls)
	require.Empty(t, files(t, h.Root))

	require.ErrorContains(t, UninstallSyncer(context.Background(), h, "../etc", true), "not a SyncTarget name")
}

func TestSystemctlFailureIsReturned(t *testing.T) {
	sd := &fakeSystemd{running: true, fail: map[string]bool{"enable --now kubestellar.service": true}}
	h, _ := testHost(t, sd)
	err := InstallServer(context.Background(), h, ServerInstall{Binary: testBinary})
	require.ErrorContains(t, err, "enable --now kubestellar.service")
}

// TestInstallKeepsSecretsOutOfExecStart: the token and the datastore
// endpoint go to the environment file as the variables the binary reads,
// never into the variable ExecStart expands; an environment file of an
// earlier install, with the secrets among the flags, is rewritten by the
// next install.
func TestInstallKeepsSecretsOutOfExecStart(t *testing.T) {
	const password = `pw/with@every:char?and#more'"$` + "`\\"
	endpoint := "mysql://ks:" + password + "@tcp(127.0.0.1:3306)/kubestellar"
	h, _ := testHost(t, nil)
	serverEnv := filepath.Join(h.Root, ServerEnvFile)
	syncerEnv := filepath.Join(h.Root, SyncerEnvFile("edge1"))
	require.NoError(t, os.MkdirAll(filepath.Dir(serverEnv), 0o755))
	// As an earlier install wrote them.
	old, err := FormatEnvFile("", ServerArgsVar, []string{"--data-dir=/srv/ks", "--datastore-endpoint=" + endpoint, "--token=cluster-secret"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(serverEnv, old, 0o600))
	dataDir, err := serverDataDir(h)
	require.NoError(t, err)
	require.Equal(t, "/srv/ks", dataDir, "an earlier environment file still reads")

	require.NoError(t, InstallServer(context.Background(), h, ServerInstall{Binary: testBinary,
		Args: []string{"--data-dir=/srv/ks", "--datastore-endpoint=" + endpoint, "--token=cluster-secret"}}))
	require.NoError(t, InstallSyncer(context.Background(), h, SyncerInstall{Binary: testBinary,
		Args: []string{"--server=https://center:6443", "--token=" + testToken, "--sync-target=edge1", "--kubeconfig=/k"}}))

	for _, tc := range []struct {
		file, argsVar string
		args          []string
		secrets       map[string]string
	}{
		{file: serverEnv, argsVar: ServerArgsVar, args: []string{"--data-dir=/srv/ks"},
			secrets: map[string]string{"KUBESTELLAR_DATASTORE_ENDPOINT": endpoint, "KUBESTELLAR_TOKEN": "cluster-secret"}},
		{file: syncerEnv, argsVar: SyncerArgsVar,
			args:    []string{"--data-dir=/var/lib/kubestellar-syncer/edge1", "--kubeconfig=/k", "--server=https://center:6443", "--sync-target=edge1"},
			secrets: map[string]string{"KUBESTELLAR_TOKEN": testToken}},
	} {
		data, err := os.ReadFile(tc.file)
		require.NoError(t, err)
		vars, err := ParseEnvFile(data)
		require.NoError(t, err)
		require.Equal(t, tc.args, readEnvArgs(t, h, strings.TrimPrefix(tc.file, h.Root), tc.argsVar))
		for name, value := range tc.secrets {
			require.Equal(t, value, vars[name], "%s in %s", name, tc.file)
			require.NotContains(t, vars[tc.argsVar], value, "a secret in %s, which ExecStart expands", tc.argsVar)
		}
		require.Len(t, vars, 1+len(tc.secrets))
		// A shell sourcing the file reads the same values.
		for name, value := range tc.secrets {
			out, err := exec.Command("sh", "-c", `. "$1" && eval "printf '%s' \"\$$2\""`, "sh", tc.file, name).Output()
			require.NoError(t, err)
			require.Equal(t, value, string(out), "%s as a shell reads %s", name, tc.file)
		}
	}
}

func TestFormatEnvFileRefusesControlCharactersInSecrets(t *testing.T) {
	_, err := FormatEnvFile("", "V", nil, EnvVar{Name: "KUBESTELLAR_TOKEN", Value: "abc\nEVIL=1"})
	require.ErrorContains(t, err, "the value of KUBESTELLAR_TOKEN holds a control character")
	require.NotContains(t, err.Error(), "abc", "the value may be a secret")
}

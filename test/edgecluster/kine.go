// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Standalone kine (github.com/k3s-io/kine's own command), for comparing a
// server with kine embedded to kube-apiserver on the same kine. It is
// built from the module beside the tools module, test/edgecluster/kine,
// which pins kine and every module it shares with kubestellar's go.mod at
// kubestellar's versions (TestKineModuleMatchesMain checks), and with cgo,
// as kubestellar is built: the same kine, on the same SQLite library.

// EnvKineDir overrides where the kine module (test/edgecluster/kine) is
// found; by default it is beside the tools module.
const EnvKineDir = "KUBESTELLAR_EDGECLUSTER_KINE_DIR"

// KineBinary is the file name of kine in a binaries directory. With
// $KUBESTELLAR_EDGECLUSTER_BIN set, EnsureKine uses the one there.
const KineBinary = "kine"

const (
	// kineRecipe changes whenever the way kine is built changes.
	kineRecipe     = "edgecluster-kine-recipe-1 cgo"
	kineModulePath = "github.com/kubestellar/kubestellar/test/edgecluster/kine"
	kineVersions   = "KINE-VERSIONS.json"
)

// KineBuild is a built kine.
type KineBuild struct {
	// Path is the kine binary.
	Path string
	// Kine and SQLite are the versions of github.com/k3s-io/kine and of
	// github.com/mattn/go-sqlite3 it was built with, when recorded.
	Kine   string `json:"kine"`
	SQLite string `json:"sqlite"`
}

// EnsureKine returns kine, building it first if this machine has not built
// it yet (a minute or more, SQLite's C code mostly; cached like the
// cluster's binaries, under its own key).
func EnsureKine(ctx context.Context, logf Logf) (*KineBuild, error) {
	return BuildOptions{Logf: logf}.EnsureKine(ctx)
}

// EnsureKine is the package's EnsureKine with explicit options; KineDir
// defaults to $KUBESTELLAR_EDGECLUSTER_KINE_DIR, else the directory kine
// beside ToolsDir.
func (o BuildOptions) EnsureKine(ctx context.Context) (*KineBuild, error) {
	dir, err := o.ensureToolModule(ctx, toolModule{
		what: "kine", dir: o.KineDir, envDir: EnvKineDir, dirName: "kine", modulePath: kineModulePath,
		recipe: kineRecipe, cachePrefix: "kine-", cgo: true, note: " (SQLite's C code takes a minute or more)",
		commands:     map[string]string{KineBinary: "github.com/k3s-io/kine"},
		versions:     map[string]string{"kine": "github.com/k3s-io/kine", "sqlite": "github.com/mattn/go-sqlite3"},
		versionsFile: kineVersions,
		buildHint:    "build it with `go run ./test/edgecluster/cmd/edge-cluster -build-kine` and copy it there",
	})
	if err != nil {
		return nil, err
	}
	return readKineBuild(filepath.Join(dir, KineBinary)), nil
}

// readKineBuild describes the kine at path, with the versions recorded
// beside it if any.
func readKineBuild(path string) *KineBuild {
	b := &KineBuild{}
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(path), kineVersions)); err == nil {
		_ = json.Unmarshal(data, b)
	}
	b.Path = path
	return b
}

// KineOptions configures StartKine.
type KineOptions struct {
	// Binary is the kine to run. Default: EnsureKine.
	Binary *KineBuild
	// Dir holds kine's socket and log (kine.sock, kine.log); it must exist.
	Dir string
	// Endpoint is kine's datastore (its --endpoint), e.g.
	// sqlite:///path/state.db?_journal_mode=WAL.
	Endpoint string
	// Args are more kine flags, after --listen-address, --endpoint and
	// --metrics-bind-address=0 (no metrics server).
	Args []string
	// Logf receives progress lines. Nil discards them.
	Logf Logf
	// StartTimeout bounds the start. Default 1 minute.
	StartTimeout time.Duration
}

// Kine is a running standalone kine, serving the etcd API on a unix
// socket.
type Kine struct {
	// Endpoint is its listener, for --etcd-servers or a kine endpoint:
	// unix://<Dir>/kine.sock.
	Endpoint string
	// LogPath is its log.
	LogPath string
	proc    *process

	stopOnce sync.Once
	stopErr  error
}

// StartKine starts kine on a unix socket in opts.Dir and returns once it
// answers an etcd read. The caller must Stop it.
func StartKine(ctx context.Context, opts KineOptions) (_ *Kine, err error) {
	if opts.Logf == nil {
		opts.Logf = discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	if opts.Dir == "" || opts.Endpoint == "" {
		return nil, fmt.Errorf("edgecluster: StartKine needs a Dir and an Endpoint")
	}
	if opts.Binary == nil {
		if opts.Binary, err = EnsureKine(ctx, opts.Logf); err != nil {
			return nil, err
		}
	}
	k := &Kine{Endpoint: "unix://" + filepath.Join(opts.Dir, "kine.sock"), LogPath: filepath.Join(opts.Dir, "kine.log")}
	argv := append([]string{opts.Binary.Path,
		"--listen-address=" + k.Endpoint,
		"--endpoint=" + opts.Endpoint,
		"--metrics-bind-address=0",
	}, opts.Args...)
	if k.proc, err = startProcess("kine", k.LogPath, os.Environ(), argv...); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_, _ = k.proc.stop(5 * time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	socket := filepath.Join(opts.Dir, "kine.sock")
	var cli *clientv3.Client
	defer func() {
		if cli != nil {
			cli.Close()
		}
	}()
	var last error
	for {
		if k.proc.exited() {
			return nil, k.proc.exitError()
		}
		// kine listens once its datastore is ready; until its socket is
		// there the etcd client would only log its retries.
		if _, statErr := os.Stat(socket); statErr != nil {
			last = statErr
		} else if cli == nil {
			cli, last = clientv3.New(clientv3.Config{Endpoints: []string{k.Endpoint}, DialTimeout: 2 * time.Second})
		}
		if cli != nil {
			attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
			_, last = cli.Get(attempt, "/edgecluster/kine-check", clientv3.WithCountOnly())
			cancelAttempt()
			if last == nil {
				return k, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kine did not answer within %s (last error: %v); see %s, which ends with:\n%s",
				opts.StartTimeout, last, k.LogPath, logTail(k.LogPath, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PID is kine's process id.
func (k *Kine) PID() int { return k.proc.pid() }

// Stop stops kine (SIGTERM, SIGKILL after 15 s) and waits for it. It
// returns an error if kine had exited before. Calling it again returns the
// first result.
func (k *Kine) Stop() error {
	k.stopOnce.Do(func() {
		if k.proc.exited() {
			k.stopErr = k.proc.exitError()
			return
		}
		killed, err := k.proc.stop(15 * time.Second)
		if err == nil && killed {
			err = fmt.Errorf("kine did not exit within 15 s of SIGTERM and was killed; see %s", k.LogPath)
		}
		k.stopErr = err
	})
	return k.stopErr
}

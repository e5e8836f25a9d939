// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/spaces"
)

// InProcess is a kubestellar server running in the test process.
type InProcess struct {
	DataDir    string
	Port       int
	Kubeconfig string
	Config     *server.Config
	stop       context.CancelFunc
	done       chan error
}

// StartInProcess starts a server on a fresh data dir (or dataDir, to
// restart on an existing one) and stops it when the test ends.
func StartInProcess(t testing.TB, dataDir string) *InProcess {
	t.Helper()
	return StartInProcessWith(t, dataDir, nil)
}

// StartInProcessWith is StartInProcess with options changed by set (nil
// changes nothing) before they are completed.
func StartInProcessWith(t testing.TB, dataDir string, set func(*server.Options)) *InProcess {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	opts := server.NewOptions()
	opts.DataDir = dataDir
	opts.BindAddress = "127.0.0.1"
	opts.Port = FreePort(t)
	if set != nil {
		set(opts)
	}
	completed, err := opts.Complete()
	require.NoError(t, err)
	require.Empty(t, completed.Validate())

	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger.WithName("server")))
	cfg, err := server.NewConfig(ctx, completed)
	require.NoError(t, err)
	srv, err := cfg.New(ctx)
	if err != nil {
		cfg.Close()
	}
	require.NoError(t, err)
	s := &InProcess{DataDir: dataDir, Port: opts.Port, Config: cfg, stop: cancel, done: make(chan error, 1),
		Kubeconfig: filepath.Join(dataDir, "admin.kubeconfig")}
	go func() { s.done <- srv.Run(ctx) }()
	t.Cleanup(s.Stop)
	if err := WaitReady(ctx, opts.Port, 30*time.Second); err != nil {
		s.Stop()
		t.Fatalf("server not ready: %v", err)
	}
	return s
}

// Stop shuts the server down and waits until it has.
func (s *InProcess) Stop() {
	if s.stop == nil {
		return
	}
	s.stop()
	s.stop = nil
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		panic("in-process server did not stop within 30s")
	}
}

// RESTConfig returns an admin client configuration for a space.
func (s *InProcess) RESTConfig(t testing.TB, space string) *rest.Config {
	cfg := AdminConfig(t, s.Kubeconfig, spaces.Root)
	cfg.Host += spaces.URLPath(space)
	if space == spaces.Wildcard {
		cfg.Host = AdminConfig(t, s.Kubeconfig, spaces.Root).Host + spaces.PathPrefix + spaces.Wildcard
	}
	return cfg
}

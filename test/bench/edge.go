// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/test/edgecluster"
)

// joinedEdge is a real edge cluster (test/edgecluster) joined to a server
// by a `kubestellar syncer join` child process: what the syncer and tunnel
// sections measure against.
type joinedEdge struct {
	cluster *edgecluster.Cluster
	syncer  *syncerProcess
	dataDir string // the syncer's
	// joinArgs are the syncer's arguments after the binary.
	joinArgs []string
}

// joinEdge starts an edge cluster, makes its SyncTarget name (labelled
// labels, k=v,...) in the existing inventory space with `kubestellar
// synctarget create`, runs the join command it prints, and waits until the
// SyncTarget says its syncer is connected. On error it stops what it
// started; the error then ends with the syncer's log, if there is one.
func joinEdge(ctx context.Context, bin string, s *server, inventory, name, labels string, progress func(string, ...any)) (_ *joinedEdge, err error) {
	progress("starting an edge cluster (builds its binaries on first use)")
	cluster, err := edgecluster.StartCluster(ctx, edgecluster.Options{Name: name,
		Logf: func(format string, args ...any) { progress("edgecluster: "+format, args...) }})
	if err != nil {
		return nil, fmt.Errorf("starting the edge cluster: %w", err)
	}
	e := &joinedEdge{cluster: cluster}
	defer func() {
		if err != nil {
			err = e.withLog(err)
			if stopErr := e.stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping it: %v)", err, stopErr)
			}
		}
	}()

	out, err := s.cli(ctx, bin, "synctarget", "create", name, "--inventory-space", inventory, "--labels", labels)
	if err != nil {
		return nil, err
	}
	// Only the join command goes to stdout; it holds the token, which must
	// not end up in an error message.
	join := strings.Fields(strings.TrimSpace(out))
	if len(join) < 3 || join[0] != "kubestellar" || join[1] != "syncer" {
		return nil, fmt.Errorf("kubestellar synctarget create printed %d words, not a 'kubestellar syncer join' command", len(join))
	}
	if e.dataDir, err = os.MkdirTemp("", "kubestellar-bench-syncer-"); err != nil {
		return nil, err
	}
	e.joinArgs = join[1:]
	if e.syncer, err = startSyncer(bin, e.joinArgs, cluster.KubeconfigPath, e.dataDir); err != nil {
		return nil, err
	}

	inv := dynamic.NewForConfigOrDie(s.config(inventory))
	progress("waiting for the syncer to connect")
	if err := e.syncer.poll(ctx, time.Minute, "the SyncTarget to say the syncer is connected", func(ctx context.Context) (bool, error) {
		st, err := inv.Resource(stGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return syncerConnected(st), nil
	}); err != nil {
		return nil, err
	}
	return e, nil
}

// syncerConnected reads a SyncTarget's SyncerConnected condition.
func syncerConnected(st *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(st.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == edgev2alpha1.SyncTargetSyncerConnected {
			return m["status"] == "True"
		}
	}
	return false
}

// withLog appends the end of the syncer's log to err (nil stays nil). Call
// it before stop, which removes the log.
func (e *joinedEdge) withLog(err error) error {
	if err == nil || e.syncer == nil {
		return err
	}
	if tail := tailFile(e.syncer.logPath, 3000); tail != "" {
		return fmt.Errorf("%w\n--- end of the syncer's log ---\n%s", err, tail)
	}
	return err
}

// restartSyncer stops the syncer and starts it again from bin, with the
// same arguments and data dir (its saved state).
func (e *joinedEdge) restartSyncer(bin string) error {
	e.syncer.stop()
	p, err := startSyncer(bin, e.joinArgs, e.cluster.KubeconfigPath, e.dataDir)
	if err != nil {
		return err
	}
	e.syncer = p
	return nil
}

// stop stops the syncer, removes its data dir and stops the edge cluster.
func (e *joinedEdge) stop() error {
	if e.syncer != nil {
		e.syncer.stop()
	}
	if e.dataDir != "" {
		os.RemoveAll(e.dataDir)
	}
	if err := e.cluster.Stop(); err != nil {
		return fmt.Errorf("stopping the edge cluster: %w", err)
	}
	return nil
}

// prefixed returns a progress function that starts every line with prefix.
func prefixed(progress func(string, ...any), prefix string) func(string, ...any) {
	return func(format string, args ...any) { progress(prefix+format, args...) }
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/certs"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/server/bootstrap"
	"github.com/kubestellar/kubestellar/server/storage"
)

// syncIdentity makes the data directory hold the cluster's shared CA and
// admin token: those in the datastore, or this server's own (made now if
// needed), which it then stores there for the servers to come.
func syncIdentity(ctx context.Context, ds *storage.Datastore, token, dataDir string) error {
	logger := klog.FromContext(ctx)
	cli, err := ds.Client(ctx, 30*time.Second)
	if err != nil {
		return fmt.Errorf("datastore: %w", err)
	}
	defer cli.Close()
	pki := PKIDir(dataDir)
	caCert, caKey := filepath.Join(pki, certs.CACertFile), filepath.Join(pki, certs.CAKeyFile)
	tokenPath := filepath.Join(dataDir, auth.AdminTokenFile)
	local := func() (bootstrap.Identity, error) {
		if _, err := certs.EnsureCA(pki, "kubestellar-ca"); err != nil {
			return bootstrap.Identity{}, fmt.Errorf("certificate authority: %w", err)
		}
		admin, err := auth.EnsureAdminToken(dataDir)
		if err != nil {
			return bootstrap.Identity{}, fmt.Errorf("admin token: %w", err)
		}
		cert, err := os.ReadFile(caCert)
		if err != nil {
			return bootstrap.Identity{}, err
		}
		key, err := os.ReadFile(caKey)
		if err != nil {
			return bootstrap.Identity{}, err
		}
		return bootstrap.Identity{CACert: cert, CAKey: key, AdminToken: admin}, nil
	}
	id, created, err := bootstrap.Sync(ctx, cli, token, local)
	if err != nil {
		return err
	}
	if created {
		logger.Info("stored the cluster's identity (CA, admin token) in the datastore for the servers to come")
		return nil
	}
	changed := false
	for _, f := range []struct {
		path string
		data []byte
	}{{caCert, id.CACert}, {caKey, id.CAKey}, {tokenPath, []byte(id.AdminToken + "\n")}} {
		have, err := os.ReadFile(f.path)
		if err == nil && bytes.Equal(bytes.TrimSpace(have), bytes.TrimSpace(f.data)) {
			continue
		}
		if err := certs.WriteFileAtomic(f.path, f.data, 0o600); err != nil {
			return err
		}
		changed = true
	}
	if changed {
		// The serving certificate is made anew from the shared CA.
		for _, f := range []string{certs.ServingCertFile, certs.ServingKeyFile} {
			if err := os.Remove(filepath.Join(pki, f)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		logger.Info("loaded the cluster's identity (CA, admin token) from the datastore")
	}
	return nil
}

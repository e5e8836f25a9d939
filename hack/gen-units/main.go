// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gen-units writes the systemd units and the example environment
// file of the Debian package, rendered by the same code as `kubestellar
// server install` and `kubestellar syncer install`, so they never drift.
//
//	go run ./hack/gen-units -binary /usr/bin/kubestellar -root STAGING
//
// writes STAGING/lib/systemd/system/kubestellar.service,
// STAGING/lib/systemd/system/kubestellar-syncer@.service and
// STAGING/etc/kubestellar/server.env.example.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubestellar/kubestellar/packaging"
)

func main() {
	binary := flag.String("binary", "/usr/bin/kubestellar", "absolute path of kubestellar on the target machine")
	root := flag.String("root", "", "staging directory standing for / (required)")
	flag.Parse()
	if err := run(*binary, *root); err != nil {
		fmt.Fprintln(os.Stderr, "gen-units:", err)
		os.Exit(1)
	}
}

func run(binary, root string) error {
	if root == "" {
		return fmt.Errorf("-root is required")
	}
	server, err := packaging.ServerUnit(binary)
	if err != nil {
		return err
	}
	syncer, err := packaging.SyncerUnit(binary)
	if err != nil {
		return err
	}
	for _, f := range []struct{ path, data string }{
		{packaging.PackageUnitDir + "/" + packaging.ServerUnitName, server},
		{packaging.PackageUnitDir + "/" + packaging.SyncerTemplateName, syncer},
		{packaging.ServerEnvExample, packaging.ServerEnvExampleText()},
	} {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f.data), 0o644); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", p)
	}
	return nil
}

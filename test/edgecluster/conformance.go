// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"context"
	"path/filepath"
)

// EnvConformanceDir overrides where the conformance suite module
// (test/conformance/suite) is found; by default it is beside the tools
// module's parent, as in the repository.
const EnvConformanceDir = "KUBESTELLAR_CONFORMANCE_SUITE_DIR"

// ConformanceSuiteBinary is Kubernetes' end-to-end test binary, with the
// sig-api-machinery and sig-cli suites.
const ConformanceSuiteBinary = "e2e.test"

const (
	// conformanceRecipe changes whenever the way the suite is built
	// changes, so that a cached build is not reused.
	conformanceRecipe     = "conformance-suite-recipe-2"
	conformanceModulePath = "github.com/kubestellar/kubestellar/test/conformance/suite"
	conformanceVersions   = "CONFORMANCE-VERSIONS.json"
)

// EnsureConformanceSuite returns the path of e2e.test built from
// k8s.io/kubernetes at the version test/conformance/suite names, building
// it first if this machine has not built it yet (cached like the
// cluster's binaries, under a key of its own).
func (o BuildOptions) EnsureConformanceSuite(ctx context.Context) (string, error) {
	dir, err := o.ensureToolModule(ctx, toolModule{
		what: "Kubernetes' e2e.test", envDir: EnvConformanceDir, dirName: filepath.Join("..", "conformance", "suite"),
		modulePath: conformanceModulePath, recipe: conformanceRecipe, cachePrefix: "conformance-", test: true,
		note:         " (about 15 minutes cold on 2 cores)",
		commands:     map[string]string{ConformanceSuiteBinary: "."},
		versions:     map[string]string{"kubernetes": "k8s.io/kubernetes"},
		versionsFile: conformanceVersions,
		// Stamped as Kubernetes' own builds are, so that e2e.test --version
		// and the specs that read the client's version see the release.
		ldflags:   func(v map[string]string) (string, error) { return kubeVersionLDFlags(v["kubernetes"]) },
		buildHint: "build it with `go test -c -o e2e.test .` in test/conformance/suite and copy it there",
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ConformanceSuiteBinary), nil
}

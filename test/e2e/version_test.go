// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestVersion: the server reports the Kubernetes release of its libraries
// at /version, in the root space and in every space, as a SemVer that
// kubectl (and Helm, and the e2e framework) parse, with the build in its
// build metadata; kubestellar version prints both.
func TestVersion(t *testing.T) {
	srv := harness.StartBinary(t, "")
	srv.CLI(t, "space", "create", "team-a")
	// The release of the libraries go.mod names: k8s.io/apiserver v0.37.2
	// is Kubernetes v1.37.2.
	gomod := readFile(t, filepath.Join(harness.RepoRoot(), "go.mod"))
	apiserver := regexp.MustCompile(`(?m)^\s*k8s\.io/apiserver v0\.(\d+\.\d+)\S*$`).FindStringSubmatch(gomod)
	require.NotNil(t, apiserver, "k8s.io/apiserver in go.mod")
	release := "v1." + apiserver[1]
	for _, context := range []string{"root", "team-a"} {
		out, stderr, err := srv.Kubectl().Run(t.Context(), "--context", context, "version", "-o", "json")
		require.NoError(t, err, "kubectl version in %s: %s", context, stderr)
		require.NotContains(t, stderr, "error", "kubectl version in %s", context)
		var v struct {
			Server struct {
				Major, Minor, GitVersion, GitCommit, BuildDate string
			} `json:"serverVersion"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		parsed, err := utilversion.ParseSemantic(v.Server.GitVersion)
		require.NoError(t, err, "the server's version %q is SemVer", v.Server.GitVersion)
		require.Equal(t, "v"+parsed.String(), v.Server.GitVersion)
		require.True(t, strings.HasPrefix(v.Server.GitVersion, release+"+kubestellar."), "%s: the libraries' release %s, then the build", v.Server.GitVersion, release)
		require.Equal(t, []string{"1", "37"}, []string{v.Server.Major, v.Server.Minor})
		require.NotContains(t, v.Server.GitVersion+v.Server.GitCommit+v.Server.BuildDate, "$Format", "no unstamped placeholder")
	}
	require.Contains(t, srv.CLIStdout(t, "version"), "Kubernetes "+release+",", "kubestellar version prints the Kubernetes release")
}

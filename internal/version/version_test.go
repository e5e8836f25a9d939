// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// TestInfo: whatever a build stamps as Version, the server's version is
// the Kubernetes release with the build as SemVer build metadata.
func TestInfo(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	for stamped, build := range map[string]string{
		"v0.0.0-dev":         "kubestellar.0.0.0-dev",
		"9fa5492-dirty":      "kubestellar.9fa5492-dirty",
		"v0.4.0-3-g9fa5492":  "kubestellar.0.4.0-3-g9fa5492",
		"v1.0.0+build/1 2":   "kubestellar.1.0.0-build-1-2",
		"$Format:%H$":        "kubestellar.Format-H",
		"":                   "kubestellar.dev",
		"...":                "kubestellar.dev",
		"release_candidate!": "kubestellar.release-candidate",
	} {
		Version = stamped
		info := Info()
		v, err := utilversion.ParseSemantic(info.GitVersion)
		require.NoError(t, err, "%q gives %q", stamped, info.GitVersion)
		require.Equal(t, build, v.BuildMetadata(), stamped)
		require.Equal(t, KubernetesRelease(), strings.TrimSuffix(info.GitVersion, "+"+build), stamped)
		require.Equal(t, []string{"1", Kubernetes[2:]}, []string{info.Major, info.Minor}, stamped)
	}
}

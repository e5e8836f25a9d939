// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/internal/version"
)

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	cmd := NewCommand(iostreams.IOStreams{Out: &out})
	cmd.SetArgs([]string{})
	require.NoError(t, cmd.Execute())
	require.Equal(t, version.Line()+"\n", out.String())
	require.True(t, strings.HasPrefix(out.String(), "kubestellar "+version.String()+" ("), out.String())
	require.True(t, strings.HasSuffix(out.String(), "Kubernetes "+version.KubernetesRelease()+", "+runtime.Version()+", "+runtime.GOOS+"/"+runtime.GOARCH+")\n"), out.String())

	cmd.SetArgs([]string{"extra"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	require.Error(t, cmd.Execute())
}

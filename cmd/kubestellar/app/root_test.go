// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/internal/version"
)

// TestVersionFlag: --version prints what `kubestellar version` prints, for
// an image that has no shell to run anything else in.
func TestVersionFlag(t *testing.T) {
	var flag, command, errOut bytes.Buffer
	require.Equal(t, 0, Run(context.Background(), []string{"--version"}, IOStreams{Out: &flag, ErrOut: &errOut}))
	require.Equal(t, 0, Run(context.Background(), []string{"version"}, IOStreams{Out: &command, ErrOut: &errOut}))
	require.Equal(t, version.Line()+"\n", flag.String())
	require.Equal(t, command.String(), flag.String())
	require.Empty(t, errOut.String())
}

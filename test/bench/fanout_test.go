// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFanoutGoals(t *testing.T) {
	for _, tt := range []struct {
		objects, targets     int
		wantTime, wantMemory string
	}{
		{100, 1000, "; target ≤ 60 s", "; target ≤ 600 MiB"},
		{100, 10000, "; target ≤ 15 min", "; target ≤ 4 GiB"},
		{1, 1000, "", ""},
		{100, 3000, "", ""},
	} {
		gotTime, gotMemory := fanoutGoals(tt.objects, tt.targets)
		require.Equal(t, tt.wantTime, gotTime, "%d × %d", tt.objects, tt.targets)
		require.Equal(t, tt.wantMemory, gotMemory, "%d × %d", tt.objects, tt.targets)
	}
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"testing"

	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/stretchr/testify/require"
)

// namedLog is a kine log that is nothing but itself.
type namedLog struct {
	logstructured.Log
	name string
}

// The log under kine's backend is found, and it is the one the backend
// was built on: a kine that keeps it otherwise fails here.
func TestLogOfKineBackend(t *testing.T) {
	want := &namedLog{name: "postgres"}
	got, ok := logOf(logstructured.New(want))
	require.True(t, ok, "the log of kine's LogStructured was not found")
	require.Same(t, want, got)

	_, ok = logOf(nil)
	require.False(t, ok)
	_, ok = logOf((*logstructured.LogStructured)(nil))
	require.False(t, ok)
	_, ok = logOf(logstructured.New(nil))
	require.False(t, ok, "a backend without a log")
}

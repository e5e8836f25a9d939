// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package revoke

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/server/auth"
)

// TestRevoke: a token is named by its id or given whole (full or bare
// form); anything else is refused before connecting.
func TestRevoke(t *testing.T) {
	for _, tc := range []struct {
		name string
		// arg makes the argument from the token made for the test.
		arg          func(tok string, id string, bearer string) string
		err          string
		notConnected bool
	}{
		{name: "by id", arg: func(_, id, _ string) string { return id }},
		{name: "whole", arg: func(tok, _, _ string) string { return tok }},
		{name: "bare", arg: func(_, _, bearer string) string { return bearer }},
		{name: "unknown id", arg: func(string, string, string) string { return "zzzzzz" }, err: "token zzzzzz: no such token"},
		{name: "neither id nor token", arg: func(string, string, string) string { return "edge1" }, notConnected: true,
			err: "ID: neither a token id (6 characters of [a-z0-9]) nor a token: malformed token"},
		{name: "a token with a bad secret", arg: func(_, id, _ string) string { return id + ".short" }, notConnected: true,
			err: "ID: neither a token id (6 characters of [a-z0-9]) nor a token: malformed token: the secret must be 16 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &center.Center{Root: k8sfake.NewClientset()}
			tok, info, err := auth.CreateUserToken(context.Background(), c.Root, auth.NewUserTokenOptions{User: "alice", CAPEM: []byte("ca")})
			require.NoError(t, err)
			connected := false
			o := &options{connect: func(*clientconfig.Options) (*center.Center, error) {
				connected = true
				return c, nil
			}}
			var out bytes.Buffer
			err = runE(context.Background(), o, tc.arg(tok.String(), info.ID, tok.Bearer()), iostreams.IOStreams{Out: &out, ErrOut: &bytes.Buffer{}})
			require.Equal(t, !tc.notConnected, connected)
			left, listErr := auth.ListTokens(context.Background(), c.Root)
			require.NoError(t, listErr)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Len(t, left, 1)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "token "+info.ID+" revoked\n", out.String())
			require.Empty(t, left)
		})
	}

	o := &options{connect: func(*clientconfig.Options) (*center.Center, error) { return nil, errors.New("no kubeconfig") }}
	require.EqualError(t, runE(context.Background(), o, "abcdef", iostreams.IOStreams{Out: &bytes.Buffer{}}), "no kubeconfig")
}

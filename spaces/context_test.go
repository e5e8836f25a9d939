// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string
	}{
		{name: "foo"},
		{name: "a"},
		{name: "team-1"},
		{name: "0abc"},
		{name: Root},
		{name: "", wantErr: "invalid space name"},
		{name: Wildcard, wantErr: "reserved for the wildcard"},
		{name: "Foo", wantErr: "invalid space name"},
		{name: "a.b", wantErr: "invalid space name"},
		{name: "a/b", wantErr: "invalid space name"},
		{name: "-a", wantErr: "invalid space name"},
		{name: "a_b", wantErr: "invalid space name"},
		{name: "a-", wantErr: "invalid space name"},
		{name: "a234567890123456789012345678901234567890123456789012345678901234", wantErr: "invalid space name"}, // 64 chars
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName(tc.name)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestURLPath(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{name: Root, want: ""},
		{name: "", want: ""},
		{name: "foo", want: "/spaces/foo"},
		{name: Wildcard, want: "/spaces/*"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, URLPath(tc.name))
		})
	}
}

func TestContext(t *testing.T) {
	tests := []struct {
		desc      string
		ctx       context.Context
		wantName  string
		wantFound bool
		wantOrRt  string
	}{
		{desc: "nothing set", ctx: context.Background(), wantName: "", wantFound: false, wantOrRt: Root},
		{desc: "empty name", ctx: WithSpace(context.Background(), ""), wantName: "", wantFound: false, wantOrRt: Root},
		{desc: "named", ctx: WithSpace(context.Background(), "foo"), wantName: "foo", wantFound: true, wantOrRt: "foo"},
		{desc: "wildcard", ctx: WithSpace(context.Background(), Wildcard), wantName: Wildcard, wantFound: true, wantOrRt: Wildcard},
		{desc: "innermost wins", ctx: WithSpace(WithSpace(context.Background(), "a"), "b"), wantName: "b", wantFound: true, wantOrRt: "b"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			name, found := FromContext(tc.ctx)
			require.Equal(t, tc.wantName, name)
			require.Equal(t, tc.wantFound, found)
			require.Equal(t, tc.wantOrRt, SpaceOrRoot(tc.ctx))
		})
	}
}

// TestIsLabel: the hand-written check says what the regular expression
// of validation.IsDNS1123Label says.
func TestIsLabel(t *testing.T) {
	for _, s := range []string{"", "a", "-", "a-", "-a", "a-b", "A", "ab.c", "a_b", "0", "9-z", "inv1-mb-0f5a",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "é", "a b", "*"} {
		require.Equal(t, len(validation.IsDNS1123Label(s)) == 0, isLabel(s), "%q", s)
	}
}

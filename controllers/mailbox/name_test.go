// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package mailbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubestellar/kubestellar/spaces"
)

func TestName(t *testing.T) {
	const uid = types.UID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0") // 36 characters, as the server makes them
	const room = 63 - len("-mb-") - len(uid)                      // 23 characters of inventory space fit
	for _, tc := range []struct {
		name      string
		inventory string
		uid       types.UID
		want      string
	}{
		{name: "short", inventory: "inv", uid: "1234", want: "inv-mb-1234"},
		{name: "root", inventory: spaces.Root, uid: uid, want: "root-mb-" + string(uid)},
		{name: "with hyphens", inventory: "east-coast-1", uid: uid, want: "east-coast-1-mb-" + string(uid)},
		{name: "exactly fits", inventory: strings.Repeat("a", room), uid: uid, want: strings.Repeat("a", room) + "-mb-" + string(uid)},
		{name: "one too long", inventory: strings.Repeat("a", room) + "b", uid: uid, want: strings.Repeat("a", room) + "-mb-" + string(uid)},
		{name: "much too long", inventory: strings.Repeat("x", 63), uid: uid, want: strings.Repeat("x", room) + "-mb-" + string(uid)},
		{name: "cut right after a hyphen", inventory: strings.Repeat("a", room-1) + "-bcd", uid: uid,
			want: strings.Repeat("a", room-1) + "-mb-" + string(uid)},
		{name: "cut after several hyphens", inventory: strings.Repeat("a", room-3) + "---bcd", uid: uid,
			want: strings.Repeat("a", room-3) + "-mb-" + string(uid)},
		{name: "hyphen just past the cut is dropped with the rest", inventory: strings.Repeat("a", room) + "-b", uid: uid,
			want: strings.Repeat("a", room) + "-mb-" + string(uid)},
		{name: "short UID leaves more room", inventory: strings.Repeat("z", 70), uid: "u1", want: strings.Repeat("z", 63-len("-mb-u1")) + "-mb-u1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Name(tc.inventory, tc.uid)
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), 63)
			require.NoError(t, spaces.ValidateName(got))
			require.True(t, strings.HasSuffix(got, "-mb-"+string(tc.uid)), got)
			require.NotContains(t, got, "--mb-")
			prefix := strings.TrimSuffix(got, "-mb-"+string(tc.uid))
			require.NotEmpty(t, prefix)
			require.True(t, strings.HasPrefix(tc.inventory, prefix), "the inventory part is a prefix of the inventory space")
		})
	}
}

func TestNameIsPerUID(t *testing.T) {
	long := strings.Repeat("inventory-", 10)
	a := Name(long, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	b := Name(long, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f1")
	require.NotEqual(t, a, b, "a recreated SyncTarget gets a fresh mailbox")
	require.Equal(t, a, Name(long, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), "the name is stable")
}

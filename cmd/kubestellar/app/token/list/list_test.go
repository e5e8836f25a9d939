// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package list

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/output"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/server/auth"
)

func TestTokenObject(t *testing.T) {
	expiration := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		info auth.TokenInfo
		want map[string]any
	}{
		{name: "a syncer token", info: auth.TokenInfo{ID: "abc123", InventorySpace: "inv1", SyncTarget: "edge1", SyncTargetUID: "uid-1",
			Expiration: expiration, Description: "rebuild", SecretSHA256: "deadbeef"},
			want: map[string]any{"apiVersion": "kubestellar.io/v1alpha1", "kind": "Token", "metadata": map[string]any{"name": "abc123"},
				"inventorySpace": "inv1", "syncTarget": "edge1", "syncTargetUID": "uid-1", "expiration": "2030-01-02T02:04:05Z", "description": "rebuild"}},
		{name: "a user token, no expiration", info: auth.TokenInfo{ID: "def456", User: "alice", Groups: []string{"team-a", "team-b"}, SecretSHA256: "deadbeef"},
			want: map[string]any{"apiVersion": "kubestellar.io/v1alpha1", "kind": "Token", "metadata": map[string]any{"name": "def456"},
				"user": "alice", "groups": []any{"team-a", "team-b"}}},
		{name: "nothing but an id", info: auth.TokenInfo{ID: "ghi789"},
			want: map[string]any{"apiVersion": "kubestellar.io/v1alpha1", "kind": "Token", "metadata": map[string]any{"name": "ghi789"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tokenObject(tc.info).Object)
		})
	}
}

// TestList lists a syncer token and a user token from a fake root space.
func TestList(t *testing.T) {
	c := &center.Center{Root: k8sfake.NewClientset()}
	ctx := context.Background()
	_, syncer, err := auth.CreateToken(ctx, c.Root, auth.NewTokenOptions{InventorySpace: "inv1", SyncTarget: "edge1", SyncTargetUID: "uid-1",
		TTL: time.Hour, Description: "edge1 rebuild", CAPEM: []byte("ca"), Now: func() time.Time { return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	userTok, user, err := auth.CreateUserToken(ctx, c.Root, auth.NewUserTokenOptions{User: "alice", Groups: []string{"team-a", "team-b"}, CAPEM: []byte("ca")})
	require.NoError(t, err)
	connect := func(*clientconfig.Options) (*center.Center, error) { return c, nil }
	list := func(format string) string {
		t.Helper()
		var out bytes.Buffer
		require.NoError(t, runE(ctx, &options{connect: connect, output: output.Options{Format: format}}, iostreams.IOStreams{Out: &out}))
		require.NotContains(t, out.String(), userTok.Secret, "never a secret")
		return out.String()
	}

	rows := map[string][]string{}
	lines := strings.Split(strings.TrimSpace(list("wide")), "\n")
	require.Len(t, lines, 3)
	require.Equal(t, []string{"ID", "SYNC-TARGET", "USER", "GROUPS", "EXPIRES", "DESCRIPTION", "SYNC-TARGET-UID"}, strings.Fields(lines[0]))
	for _, line := range lines[1:] {
		rows[strings.Fields(line)[0]] = strings.Fields(line)
	}
	require.Equal(t, []string{syncer.ID, "inv1/edge1", "-", "-", "2000-01-01T01:00:00Z", "(expired)", "edge1", "rebuild", "uid-1"}, rows[syncer.ID])
	require.Equal(t, []string{user.ID, "-", "alice", "team-a,team-b", "never", "-"}, rows[user.ID])

	require.NotContains(t, strings.Split(list(""), "\n")[0], "SYNC-TARGET-UID", "no wide column by default")

	var objects struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(list("json")), &objects))
	require.Len(t, objects.Items, 2)
	for _, item := range objects.Items {
		require.NotContains(t, item, "secretSHA256")
		require.Equal(t, "Token", item["kind"])
	}

	names := strings.Fields(list("name"))
	require.ElementsMatch(t, []string{"token.kubestellar.io/" + syncer.ID, "token.kubestellar.io/" + user.ID}, names)
}

func TestListErrors(t *testing.T) {
	connected := false
	connect := func(*clientconfig.Options) (*center.Center, error) {
		connected = true
		return nil, errors.New("no kubeconfig")
	}
	err := runE(context.Background(), &options{connect: connect, output: output.Options{Format: "table"}}, iostreams.IOStreams{Out: &bytes.Buffer{}})
	require.EqualError(t, err, `--output "table": must be one of json, yaml, name, wide`)
	require.False(t, connected, "a bad --output fails before connecting")
	err = runE(context.Background(), &options{connect: connect}, iostreams.IOStreams{Out: &bytes.Buffer{}})
	require.EqualError(t, err, "no kubeconfig")
}

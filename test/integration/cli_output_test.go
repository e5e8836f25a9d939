// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestListOutput: the list commands print as kubectl does: a table (-o
// wide adds columns, --no-headers drops the header), the objects as JSON
// or YAML, their names; a token's secret never, in any of them.
func TestListOutput(t *testing.T) {
	s := harness.StartInProcess(t, "")
	mustCLI(t, s, "space", "create", "inv1", "--type", "inventory")
	mustCLI(t, s, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	tokenLine := strings.TrimSpace(mustCLI(t, s, "token", "create", "--user", "alice", "--group", "team-a", "--description", "alice's laptop"))
	_, secret, ok := strings.Cut(tokenLine, ".")
	require.True(t, ok, "a user token is ID.SECRET: %q", tokenLine)

	// Spaces.
	table := strings.Split(strings.TrimSpace(mustCLI(t, s, "space", "list")), "\n")
	require.Equal(t, []string{"NAME", "TYPE", "PHASE", "URL", "AGE"}, strings.Fields(table[0]))
	require.Equal(t, []string{"NAME", "TYPE", "PHASE", "URL", "AGE", "OWNER", "INVENTORIES", "OBJECTS", "BYTES"},
		strings.Fields(strings.Split(mustCLI(t, s, "space", "list", "-o", "wide"), "\n")[0]))
	wide := strings.Split(strings.TrimSpace(mustCLI(t, s, "space", "list", "-o", "wide", "--no-headers")), "\n")
	require.Len(t, wide, 3, "root, inv1, wds1, no header: %q", wide)
	var wds1 []string
	for _, line := range wide {
		if f := strings.Fields(line); f[0] == "wds1" {
			wds1 = f
		}
	}
	require.NotNil(t, wds1, "wds1 in %q", wide)
	require.Equal(t, []string{"<none>", "inv1"}, wds1[len(wds1)-4:len(wds1)-2], "the owner (none: an admin made it) and inventories of the WDS")
	// What a tenant space stores against its limits, once counted.
	usage := regexp.MustCompile(`^\d+/1000 [0-9.]+(Ki)?/8\.0Mi$`)
	var shown string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, line := range strings.Split(mustCLI(t, s, "space", "list", "-o", "wide", "--no-headers"), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "wds1" {
				shown = strings.Join(f[len(f)-2:], " ")
			}
		}
		return usage.MatchString(shown), nil
	})
	require.NoError(t, err, "wds1's objects and bytes against its limits: %q", shown)

	names := strings.Fields(mustCLI(t, s, "space", "list", "-o", "name"))
	require.ElementsMatch(t, []string{"space.tenancy.kubestellar.io/inv1", "space.tenancy.kubestellar.io/wds1"}, names)
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Type string `json:"type"`
			} `json:"spec"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, s, "space", "list", "-o", "json")), &list))
	require.Equal(t, "SpaceList", list.Kind)
	require.Len(t, list.Items, 2)
	var fromYAML any
	require.NoError(t, yaml.Unmarshal([]byte(mustCLI(t, s, "space", "list", "-o", "yaml")), &fromYAML))

	// Tokens: the CLI's view, never the secret.
	for _, format := range []string{"", "wide", "json", "yaml", "name"} {
		args := []string{"token", "list"}
		if format != "" {
			args = append(args, "-o", format)
		}
		out := mustCLI(t, s, args...)
		require.NotContains(t, out, secret, "token list %v prints the secret", args)
		if format == "json" {
			var tokens struct {
				Items []map[string]any `json:"items"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &tokens))
			require.Len(t, tokens.Items, 1)
			require.Equal(t, "Token", tokens.Items[0]["kind"])
			require.Equal(t, "alice", tokens.Items[0]["user"])
			require.Equal(t, []any{"team-a"}, tokens.Items[0]["groups"])
			require.Equal(t, "alice's laptop", tokens.Items[0]["description"])
		}
	}

	// A format the command does not know is an error naming the flag.
	_, errOut, code := cli(t, s, "space", "list", "-o", "xml")
	require.NotZero(t, code)
	require.Contains(t, errOut, `--output "xml": must be one of json, yaml, name, wide`)
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package list

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
)

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 1023: "1023", 1024: "1.0Ki", 1536: "1.5Ki", 5<<20 + 512<<10: "5.5Mi",
		3 << 30: "3.0Gi", 2 << 40: "2.0Ti", 4096 << 40: "4096.0Ti",
	} {
		require.Equal(t, want, humanBytes(n, 10), "%d", n)
	}
}

func TestUsage(t *testing.T) {
	status := func(usage, limits map[string]any) map[string]any {
		s := map[string]any{}
		if usage != nil {
			s["usage"] = usage
		}
		if limits != nil {
			s["limits"] = limits
		}
		return map[string]any{"status": s}
	}
	for _, tc := range []struct {
		name            string
		space           map[string]any
		objs, byteCount string
	}{
		{name: "no usage: limits do not hold", space: status(nil, map[string]any{"objects": int64(10)}), objs: "<none>", byteCount: "<none>"},
		{name: "usage, no limit", space: status(map[string]any{"objects": int64(7), "bytes": int64(2048)}, nil), objs: "7", byteCount: "2.0Ki"},
		{name: "integer limits", space: status(map[string]any{"objects": int64(7), "bytes": int64(2048)}, map[string]any{"objects": int64(100), "bytes": int64(1 << 20)}),
			objs: "7/100", byteCount: "2.0Ki/1.0Mi"},
		{name: "quantity limits", space: status(map[string]any{"objects": int64(7), "bytes": int64(100)}, map[string]any{"objects": "1k", "bytes": "5Mi"}),
			objs: "7/1000", byteCount: "100/5.0Mi"},
		{name: "a zero or bad limit is none", space: status(map[string]any{"objects": int64(7), "bytes": int64(100)}, map[string]any{"objects": int64(0), "bytes": "lots"}),
			objs: "7", byteCount: "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.objs, usage(tc.space, "objects", strconv.FormatInt))
			require.Equal(t, tc.byteCount, usage(tc.space, "bytes", humanBytes))
		})
	}
}

func TestFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "missing.kubeconfig")
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{args: []string{"-o", "xml"}, err: `--output "xml": must be one of json, yaml, name, wide`},
		{args: []string{"extra"}, err: `unknown command "extra"`},
		{args: []string{"-o", "wide", "--no-headers"}, err: "reading kubeconfig " + kubeconfig},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
			cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, tc.args...))
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			require.ErrorContains(t, cmd.Execute(), tc.err)
		})
	}
}

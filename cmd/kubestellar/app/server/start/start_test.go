// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package start

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	"github.com/kubestellar/kubestellar/server"
)

// TestInvalidFlags: the command stops, naming every bad flag, before it
// starts anything. (Valid flags start a server: that is for the
// integration tests.)
func TestInvalidFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		errs []string
	}{
		{name: "bad port", args: []string{"--port", "0"}, errs: []string{"--port 0 is not between 1 and 65535"}},
		{name: "every mistake named", args: []string{"--port", "70000", "--bind-address", "everywhere"},
			errs: []string{"--port 70000 is not between 1 and 65535", `--bind-address "everywhere" is not an IP address`}},
		{name: "token and token file", args: []string{"--token", "a", "--token-file", filepath.Join(dir, "token")},
			errs: []string{"--token and --token-file exclude each other"}},
		{name: "missing token file", args: []string{"--token-file", filepath.Join(dir, "none")}, errs: []string{"--token-file: "}},
		{name: "an argument", args: []string{"now"}, errs: []string{`unknown command "now"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
			cmd.SetArgs(append([]string{"--data-dir", t.TempDir()}, tc.args...))
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.ExecuteContext(context.Background())
			require.Error(t, err)
			for _, want := range tc.errs {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

// TestWarnSecretFlags: a secret on the command line is warned about, and
// the warning holds no secret.
func TestWarnSecretFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        server.Options
		warnings []string
	}{
		{name: "none"},
		{name: "token file and an endpoint without a password", o: server.Options{TokenFile: "/etc/ks/token", DatastoreEndpoint: "postgres://db.example.com:5432/ks"}},
		{name: "token", o: server.Options{Token: "cluster-secret"}, warnings: []string{"the cluster token is on the command line"}},
		{name: "endpoint with a password", o: server.Options{DatastoreEndpoint: "postgres://ks:db-secret@db.example.com:5432/ks"},
			warnings: []string{"the datastore password is on the command line"}},
		{name: "both", o: server.Options{Token: "cluster-secret", DatastoreEndpoint: "mysql://ks:db-secret@tcp(db:3306)/ks"},
			warnings: []string{"the cluster token is on the command line", "the datastore password is on the command line"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))))
			warnSecretFlags(ctx, &tc.o)
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(tc.warnings) == 0 {
				require.Empty(t, buf.String())
				return
			}
			require.Len(t, lines, len(tc.warnings))
			for i, want := range tc.warnings {
				require.Contains(t, lines[i], want)
			}
			require.NotContains(t, buf.String(), "cluster-secret")
			require.NotContains(t, buf.String(), "db-secret")
		})
	}
}

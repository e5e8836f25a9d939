// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateDatastoreTLS(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	missing := filepath.Join(dir, "missing.crt")
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want []string // each in one of the errors; none for valid options
	}{
		{name: "SQLite without TLS files", set: func(*Options) {}},
		{name: "etcd with CA, certificate and key", set: func(o *Options) {
			o.DatastoreEndpoint = "https://127.0.0.1:2379"
			o.DatastoreCAFile, o.DatastoreCertFile, o.DatastoreKeyFile = file, file, file
		}},
		{name: "PostgreSQL with a CA only", set: func(o *Options) {
			o.DatastoreEndpoint = "postgres://ks:pw@db/ks"
			o.DatastoreCAFile = file
		}},
		{name: "TLS files without an external datastore", set: func(o *Options) { o.DatastoreCAFile = file },
			want: []string{"--datastore-cafile is for an external datastore: set --datastore-endpoint too"}},
		{name: "TLS files with SQLite named", set: func(o *Options) {
			o.DatastoreEndpoint = "sqlite:///tmp/x.db"
			o.DatastoreCAFile = file
		}, want: []string{"--datastore-cafile is for an external datastore"}},
		{name: "a certificate without its key", set: func(o *Options) {
			o.DatastoreEndpoint = "https://127.0.0.1:2379"
			o.DatastoreCertFile = file
		}, want: []string{"--datastore-certfile and --datastore-keyfile go together"}},
		{name: "a file that is not there", set: func(o *Options) {
			o.DatastoreEndpoint = "https://127.0.0.1:2379"
			o.DatastoreCAFile = missing
		}, want: []string{"--datastore-cafile: open " + missing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.DataDir = dir
			tc.set(o)
			c, err := o.Complete()
			require.NoError(t, err)
			errs := c.Validate()
			if len(tc.want) == 0 {
				require.Empty(t, errs)
				return
			}
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			all := strings.Join(msgs, "\n")
			for _, w := range tc.want {
				require.Contains(t, all, w)
			}
		})
	}
}

func TestValidateHTTPAddress(t *testing.T) {
	for _, tc := range []struct {
		addr, bind string
		want       string // "" for valid
	}{
		{addr: "10.0.0.5:6080"},
		{addr: ":6080"},
		{addr: "6080", want: `--http-address "6080": address 6080: missing port in address`},
		{addr: "lb.example.com:6080", want: `"lb.example.com" is not an IP address`},
		{addr: "10.0.0.5:0", want: `port "0" is not between 1 and 65535`},
		{addr: "10.0.0.5:http", want: `port "http" is not between 1 and 65535`},
		{addr: ":6443", want: "port 6443 is the HTTPS --port"},
		{addr: "127.0.0.1:6443", bind: "127.0.0.1", want: "port 6443 is the HTTPS --port"},
		{addr: "127.0.0.2:6443", bind: "127.0.0.1"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			o := NewOptions()
			o.DataDir = t.TempDir()
			o.HTTPAddress = tc.addr
			if tc.bind != "" {
				o.BindAddress = tc.bind
			}
			c, err := o.Complete()
			require.NoError(t, err)
			errs := c.Validate()
			if tc.want == "" {
				require.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			require.Contains(t, errs[0].Error(), tc.want)
		})
	}
}

func TestSecretsFromEnv(t *testing.T) {
	env := map[string]string{TokenEnv: "token-from-env", DatastoreEndpointEnv: "postgres://ks:pw@127.0.0.1/ks"}
	for _, tc := range []struct {
		name                string
		env                 map[string]string
		set                 func(*Options)
		token, endpoint     string
		tokenFile           string
		used                []string
		completeErr, valErr string
	}{
		{name: "nothing", env: map[string]string{}},
		{name: "both from the environment", env: env, token: "token-from-env", endpoint: "postgres://ks:pw@127.0.0.1/ks",
			used: []string{TokenEnv, DatastoreEndpointEnv}},
		{name: "empty variables are unset", env: map[string]string{TokenEnv: "", DatastoreEndpointEnv: ""}},
		{name: "flags win", env: env, set: func(o *Options) { o.Token, o.DatastoreEndpoint = "flag-token", "mysql://ks:pw@tcp(127.0.0.1)/ks" },
			token: "flag-token", endpoint: "mysql://ks:pw@tcp(127.0.0.1)/ks"},
		{name: "--token-file wins over the environment", env: env, tokenFile: "file-token\n",
			token: "file-token", endpoint: "postgres://ks:pw@127.0.0.1/ks", used: []string{DatastoreEndpointEnv}},
		{name: "--token and --token-file", env: map[string]string{}, set: func(o *Options) { o.Token = "flag-token" }, tokenFile: "file-token",
			completeErr: "--token and --token-file exclude each other"},
		{name: "empty token file", env: map[string]string{}, tokenFile: " \n", completeErr: "is empty"},
		{name: "a bad endpoint from the environment, redacted", env: map[string]string{DatastoreEndpointEnv: "postgres://ks:hunter2/sesame@127.0.0.1/ks"},
			endpoint: "postgres://ks:hunter2/sesame@127.0.0.1/ks", used: []string{DatastoreEndpointEnv},
			valErr: `--datastore-endpoint: datastore endpoint "postgres://ks:REDACTED@127.0.0.1/ks": an @ after the host: percent-encode`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.DataDir = t.TempDir()
			if tc.set != nil {
				tc.set(o)
			}
			if tc.tokenFile != "" {
				o.TokenFile = filepath.Join(t.TempDir(), "token")
				require.NoError(t, os.WriteFile(o.TokenFile, []byte(tc.tokenFile), 0o600))
			}
			used := o.FromEnv(func(name string) string { return tc.env[name] })
			c, err := o.Complete()
			if tc.completeErr != "" {
				require.ErrorContains(t, err, tc.completeErr)
				if strings.Contains(tc.completeErr, "--token-file") {
					require.ErrorContains(t, err, "--token ")
				}
				if tc.completeErr == "is empty" {
					require.ErrorContains(t, err, o.TokenFile, "the error names the file")
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.used, used)
			require.Equal(t, tc.token, c.Token)
			require.Equal(t, tc.endpoint, c.DatastoreEndpoint)
			errs := c.Validate()
			if tc.valErr == "" {
				require.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			require.ErrorContains(t, errs[0], tc.valErr)
			for _, secret := range []string{"hunter2", "sesame"} {
				require.NotContains(t, errs[0].Error(), secret)
			}
		})
	}
}

func TestValidateInflight(t *testing.T) {
	o := NewOptions()
	require.Equal(t, 2*o.MaxMutatingRequestsInFlight, o.MaxRequestsInFlight, "two seats for reads per seat for writes")
	require.Positive(t, o.MaxMutatingRequestsInFlight)
	o.DataDir = t.TempDir()
	o.MaxRequestsInFlight, o.MaxMutatingRequestsInFlight = 0, -1
	c, err := o.Complete()
	require.NoError(t, err)
	errs := c.Validate()
	require.Len(t, errs, 2)
	require.Contains(t, errs[0].Error(), "--max-requests-inflight 0: want at least 1")
	require.Contains(t, errs[1].Error(), "--max-mutating-requests-inflight -1: want at least 1")
}

func TestValidateMailboxObjectLimit(t *testing.T) {
	o := NewOptions()
	require.Equal(t, DefaultMailboxObjectLimit, o.MailboxObjectLimit, "bounded by default")
	o.DataDir = t.TempDir()
	for _, limit := range []int{0, 1} {
		o.MailboxObjectLimit = limit
		c, err := o.Complete()
		require.NoError(t, err)
		require.Empty(t, c.Validate(), "limit %d", limit)
	}
	o.MailboxObjectLimit = -1
	c, err := o.Complete()
	require.NoError(t, err)
	errs := c.Validate()
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "--mailbox-object-limit -1: want 0 (no bound) or more")
}

func TestValidateSpacesPerUser(t *testing.T) {
	o := NewOptions()
	require.Equal(t, DefaultSpacesPerUser, o.SpacesPerUser, "bounded by default")
	o.DataDir = t.TempDir()
	o.SpacesPerUser = -1
	c, err := o.Complete()
	require.NoError(t, err)
	errs := c.Validate()
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "--spaces-per-user -1: want 0 (no bound) or more")
}

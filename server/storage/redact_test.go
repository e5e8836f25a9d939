// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// secret holds every character that cuts a URL or a DSN: / @ : ? # and a
// comma, between words that must never show.
const secret = "alpha/bravo@charlie:delta?echo#foxtrot,golf"

// secretPieces are the words of secret, and of every other secret the
// tables use: none may show, whole or in part.
var secretPieces = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "s3cret", "hunter2", "tokentoken", "sesame"}

// requireNoSecret fails if text holds a piece of a secret, or a secret
// whole, escaped or not.
func requireNoSecret(t *testing.T, text string) {
	t.Helper()
	for _, piece := range append(secretPieces, secret, url.QueryEscape(secret), url.PathEscape(secret)) {
		require.NotContains(t, text, piece, "a secret shows in %q", text)
	}
}

func TestRedact(t *testing.T) {
	escaped := url.QueryEscape(secret) // alpha%2Fbravo%40charlie%3Adelta%3Fecho%23foxtrot%2Cgolf
	for _, tc := range []struct {
		desc, endpoint, want string
	}{
		// PostgreSQL: a URL; kine percent-decodes the password.
		{"postgres", "postgres://kine:s3cret@db.example.com:5432/kine?sslmode=disable",
			"postgres://kine:REDACTED@db.example.com:5432/kine?sslmode=disable"},
		{"postgres, password percent-encoded", "postgres://kine:" + escaped + "@db.example.com:5432/kine?sslmode=disable",
			"postgres://kine:REDACTED@db.example.com:5432/kine?sslmode=disable"},
		{"postgres, password not encoded (refused by CheckEndpoint)", "postgres://kine:" + secret + "@db.example.com:5432/kine?sslmode=disable",
			"postgres://kine:REDACTED@db.example.com:5432/kine?sslmode=disable"},
		{"postgresql scheme", "postgresql://kine:s3cret@db.example.com/kine", "postgresql://kine:REDACTED@db.example.com/kine"},
		{"postgres, user without password", "postgres://kine@db.example.com:5432/kine", "postgres://kine@db.example.com:5432/kine"},
		{"postgres, empty password", "postgres://kine:@db.example.com/kine", "postgres://kine:REDACTED@db.example.com/kine"},
		{"postgres, password in the query", "postgres://db.example.com/kine?password=" + escaped + "&sslmode=require",
			"postgres://db.example.com/kine?password=REDACTED&sslmode=require"},
		{"password-like query keys, any case", "postgres://db.example.com/kine?sslPassword=hunter2&PASSWORD=sesame&sslmode=verify-full",
			"postgres://db.example.com/kine?sslPassword=REDACTED&PASSWORD=REDACTED&sslmode=verify-full"},
		{"user info and query password", "postgres://u:s3cret@h/db?password=hunter2", "postgres://u:REDACTED@h/db?password=REDACTED"},
		{"an @ in the query hides more, never less", "postgres://kine:s3cret@h:5432/db?application_name=me@example",
			"postgres://kine:REDACTED@example"},
		{"postgres key=value (refused by CheckEndpoint)", "postgres://host=db.example.com user=kine password=" + strings.ReplaceAll(secret, ",", "") + " dbname=kine",
			"postgres://host=db.example.com user=kine password=REDACTED dbname=kine"},
		{"postgres key=value, quoted", "postgres://host=db user=kine password='hunter2 sesame' dbname=kine",
			"postgres://host=db user=kine password=REDACTED dbname=kine"},
		{"password with a percent-escape of %", "postgres://kine:100%25s3cret@db/kine", "postgres://kine:REDACTED@db/kine"},

		// MySQL: go-sql-driver's DSN, the password taken as written.
		{"mysql", "mysql://kine:s3cret@tcp(db.example.com:3306)/kine", "mysql://kine:REDACTED@tcp(db.example.com:3306)/kine"},
		{"mysql, every special character", "mysql://kine:" + secret + "@tcp(db.example.com:3306)/kine",
			"mysql://kine:REDACTED@tcp(db.example.com:3306)/kine"},
		{"mysql without port", "mysql://kine:s3cret@tcp(db)/kine", "mysql://kine:REDACTED@tcp(db)/kine"},
		{"mysql without database (refused by CheckEndpoint)", "mysql://kine:" + secret + "@tcp(db:3306)", "mysql://kine:REDACTED@tcp(db:3306)"},
		{"mysql over a socket", "mysql://kine:s3cret@unix(/run/mysqld/mysqld.sock)/kine", "mysql://kine:REDACTED@unix(/run/mysqld/mysqld.sock)/kine"},
		{"mysql with parameters", "mysql://kine:s3cret@tcp(db:3306)/kine?tls=custom&timeout=5s", "mysql://kine:REDACTED@tcp(db:3306)/kine?tls=custom&timeout=5s"},
		{"mysql, & and = in the password", "mysql://kine:a&b=hunter2@tcp(db)/kine", "mysql://kine:REDACTED@tcp(db)/kine"},
		{"mysql without scheme (refused)", "kine:" + secret + "@tcp(db.example.com:3306)/kine", "kine:REDACTED@tcp(db.example.com:3306)/kine"},
		{"mysql without user", "mysql://tcp(db:3306)/kine", "mysql://tcp(db:3306)/kine"},
		{"mysql over the default socket", "mysql:///kine", "mysql:///kine"},
		{"mysql, user:password without @ (refused)", "mysql://kine:hunter2/kine", "mysql://REDACTED/kine"},
		{"mysql, user:password without @ nor database (refused)", "mysql://kine:hunter2", "mysql://REDACTED"},

		// NATS: a list of URLs; a lone user is a token.
		{"nats", "nats://kine:" + escaped + "@nats.example.com:4222?bucket=kine", "nats://kine:REDACTED@nats.example.com:4222?bucket=kine"},
		{"nats token", "nats://tokentoken@nats.example.com:4222", "nats://REDACTED@nats.example.com:4222"},
		{"nats list", "nats://u:hunter2@n1:4222,nats://u:sesame@n2:4222,nats://n3:4222",
			"nats://u:REDACTED@n1:4222,nats://u:REDACTED@n2:4222,nats://n3:4222"},
		{"nats, comma in the password", "nats://u:hunter2,sesame@n1:4222", "nats://u:REDACTED@n1:4222"},
		{"nats without credentials", "nats://nats.example.com:4222?bucket=kine", "nats://nats.example.com:4222?bucket=kine"},

		// etcd: a list of URLs, passed through.
		{"etcd", "https://127.0.0.1:2379", "https://127.0.0.1:2379"},
		{"etcd list", "https://etcd1:2379,https://etcd2:2379,http://etcd3:2379", "https://etcd1:2379,https://etcd2:2379,http://etcd3:2379"},
		{"etcd list with user info (refused by CheckEndpoint)", "https://root:hunter2@etcd1:2379,https://root:" + escaped + "@etcd2:2379",
			"https://root:REDACTED@etcd1:2379,https://root:REDACTED@etcd2:2379"},
		{"etcd over a socket", "unix:///run/etcd/etcd.sock", "unix:///run/etcd/etcd.sock"},
		{"etcd over a TLS socket", "unixs:///run/etcd/etcd.sock", "unixs:///run/etcd/etcd.sock"},

		// SQLite: a path; only its parameters may hold a secret.
		{"sqlite", "sqlite:///var/lib/kubestellar/db/state.db", "sqlite:///var/lib/kubestellar/db/state.db"},
		{"sqlite, relative", "sqlite://db/state.db", "sqlite://db/state.db"},
		{"sqlite, default", DefaultEndpoint("/var/lib/kubestellar"), DefaultEndpoint("/var/lib/kubestellar")},
		{"sqlite, @ and : in the path", "sqlite:///srv/a:b@c/state.db?_journal=WAL", "sqlite:///srv/a:b@c/state.db?_journal=WAL"},
		{"sqlite authentication", "sqlite:///srv/state.db?_auth&_auth_user=admin&_auth_pass=hunter2&_journal=WAL",
			"sqlite:///srv/state.db?_auth&_auth_user=admin&_auth_pass=REDACTED&_journal=WAL"},

		{"empty", "", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := Redact(tc.endpoint)
			require.Equal(t, tc.want, got)
			requireNoSecret(t, got)
		})
	}
}

func TestCheckEndpoint(t *testing.T) {
	escaped := url.QueryEscape(secret)
	for _, tc := range []struct {
		desc, endpoint string
		err            string // "" for a good endpoint
	}{
		{desc: "default", endpoint: ""},
		{desc: "sqlite", endpoint: DefaultEndpoint("/var/lib/kubestellar")},
		{desc: "postgres, password percent-encoded", endpoint: "postgres://kine:" + escaped + "@127.0.0.1:5432/kine?sslmode=disable"},
		{desc: "postgres, : and @ in the password as written", endpoint: "postgres://kine:alpha:bravo@charlie@127.0.0.1:5432/kine"},
		{desc: "postgres, / in the password", endpoint: "postgres://kine:alpha/bravo@127.0.0.1:5432/kine", err: "an @ after the host: percent-encode"},
		{desc: "postgres, ? in the password", endpoint: "postgres://kine:alpha?bravo@127.0.0.1/kine", err: "%3F"},
		{desc: "postgres, # in the password", endpoint: "postgres://kine:alpha#bravo@127.0.0.1/kine", err: "%23"},
		{desc: "postgres, every character as written", endpoint: "postgres://kine:" + secret + "@127.0.0.1/kine", err: "percent-encode"},
		{desc: "postgres, a numeric password with /", endpoint: "postgres://kine:12/hunter2@127.0.0.1/kine", err: "an @ after the host"},
		{desc: "postgres, bad escape in the password", endpoint: "postgres://kine:hunter2%zzsesame@127.0.0.1/kine", err: "is not a valid URL: percent-encode"},
		{desc: "postgres, bad port", endpoint: "postgres://kine:hunter2@127.0.0.1:54x2/kine", err: `is not a valid URL (invalid port ":54x2" after host)`},
		{desc: "postgres key=value", endpoint: "postgres://host=127.0.0.1 user=kine password=hunter2 dbname=kine", err: "key=value connection strings are not supported"},
		{desc: "mysql, every character as written", endpoint: "mysql://kine:" + secret + "@tcp(127.0.0.1:3306)/kine"},
		{desc: "mysql without user", endpoint: "mysql://tcp(127.0.0.1:3306)/kine"},
		{desc: "mysql, kine's default (root over the socket)", endpoint: "mysql://"},
		{desc: "mysql without database", endpoint: "mysql://kine:alpha/bravo@tcp(127.0.0.1:3306)", err: "the database after the address"},
		{desc: "mysql, @ in the parameters", endpoint: "mysql://kine:hunter2@tcp(127.0.0.1)/kine?x=a@b", err: "write an @ in the database or parameters as %40"},
		{desc: "mysql without @", endpoint: "mysql://kine:hunter2/kine", err: "write it as mysql://user:password@tcp(host:3306)/database"},
		{desc: "no scheme", endpoint: "kine:" + secret + "@tcp(127.0.0.1:3306)/kine", err: "has no scheme"},
		{desc: "etcd list", endpoint: "https://127.0.0.1:2379,https://127.0.0.2:2379"},
		{desc: "etcd with user info", endpoint: "https://127.0.0.1:2379,https://root:hunter2@127.0.0.2:2379", err: "the etcd client ignores a user name and password"},
		{desc: "etcd list of mixed schemes", endpoint: "https://127.0.0.1:2379,http://127.0.0.2:2379", err: "every URL of the list must be https://"},
		{desc: "nats list", endpoint: "nats://kine:" + escaped + "@127.0.0.1:4222,nats://127.0.0.2:4222"},
		{desc: "nats token", endpoint: "nats://tokentoken@127.0.0.1:4222"},
		{desc: "nats list of mixed schemes", endpoint: "nats://127.0.0.1:4222,tls://u:hunter2@127.0.0.2:4222", err: "every URL of the list must be nats://"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := CheckEndpoint(tc.endpoint)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
			requireNoSecret(t, err.Error())
		})
	}
}

func TestRedactError(t *testing.T) {
	escaped := url.QueryEscape(secret)
	for _, tc := range []struct {
		desc, endpoint string
		err            error
		want           string
	}{
		{desc: "a URL error quotes the URL", endpoint: "postgres://kine:" + secret + "@db/kine",
			err: func() error {
				// Not a constant, which staticcheck would check: it is meant not to parse.
				_, err := url.Parse(strings.Join([]string{"postgres://kine:", secret, "@db/kine"}, ""))
				return err
			}(),
			want: `invalid port ":REDACTED" after host`},
		{desc: "the password decoded", endpoint: "postgres://kine:" + escaped + "@db/kine",
			err: errors.New("password " + secret + " refused"), want: "password REDACTED refused"},
		{desc: "kine rebuilds the URL of another scheme", endpoint: "postgresql://kine:" + secret + "@db/kine",
			err: errors.New(`parse "postgres://kine:` + secret + `@db/kine": bad`), want: `parse "postgres://kine:REDACTED@db/kine": bad`},
		{desc: "a MySQL DSN", endpoint: "mysql://kine:" + secret + "@tcp(db)",
			err: errors.New("default addr for network 'kine:" + secret + "' unknown"), want: "default addr for network 'kine:REDACTED' unknown"},
		{desc: "a NATS token", endpoint: "nats://tokentoken@n1:4222", err: errors.New("invalid connection string=nats://tokentoken@n1:4222"),
			want: "invalid connection string=nats://REDACTED@n1:4222"},
		{desc: "nothing to hide", endpoint: "postgres://kine:hunter2@db/kine", err: errors.New("connection refused"), want: "connection refused"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := RedactError(tc.endpoint, tc.err)
			require.Contains(t, got.Error(), tc.want)
			requireNoSecret(t, got.Error())
			require.ErrorIs(t, got, tc.err, "the original stays in the chain for errors.Is")
		})
	}
	require.NoError(t, RedactError("postgres://u:p@h/db", nil))
}

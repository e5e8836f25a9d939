package storage

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		desc     string
		endpoint string
		want     string
		// secretOnly checks only that the password is gone, not the exact form.
		secretOnly bool
	}{
		{
			desc:     "postgres password",
			endpoint: "postgres://kine:s3cret@db.example.com:5432/kine?sslmode=disable",
			want:     "postgres://kine:REDACTED@db.example.com:5432/kine?sslmode=disable",
		},
		{
			desc:     "postgres user without password",
			endpoint: "postgres://kine@db.example.com:5432/kine",
			want:     "postgres://kine@db.example.com:5432/kine",
		},
		{
			desc:     "password in the query string",
			endpoint: "postgres://db.example.com/kine?password=s3cret&sslmode=require",
			want:     "postgres://db.example.com/kine?password=REDACTED&sslmode=require",
		},
		{
			desc:     "password-like query keys, any case",
			endpoint: "postgres://db.example.com/kine?sslPassword=a&PASSWORD=b",
			want:     "postgres://db.example.com/kine?sslPassword=REDACTED&PASSWORD=REDACTED",
		},
		{
			desc:     "user password and query password",
			endpoint: "postgres://u:p1@h/db?password=p2",
			want:     "postgres://u:REDACTED@h/db?password=REDACTED",
		},
		{
			desc:     "mysql DSN with port",
			endpoint: "mysql://kine:s3cret@tcp(db.example.com:3306)/kine",
			want:     "mysql://kine:REDACTED@tcp(db.example.com:3306)/kine",
		},
		{
			desc:     "mysql DSN password containing @",
			endpoint: "mysql://kine:p@ss@tcp(db:3306)/kine",
			want:     "mysql://kine:REDACTED@tcp(db:3306)/kine",
		},
		{
			desc:     "mysql DSN without port",
			endpoint: "mysql://kine:s3cret@tcp(db)/kine",
			want:     "mysql://kine:REDACTED@tcp(db)/kine",
		},
		{
			desc:     "sqlite path",
			endpoint: "sqlite:///var/lib/kubestellar/db/state.db",
			want:     "sqlite:///var/lib/kubestellar/db/state.db",
		},
		{
			desc:     "sqlite relative path",
			endpoint: "sqlite://db/state.db",
			want:     "sqlite://db/state.db",
		},
		{
			desc:     "etcd endpoint",
			endpoint: "https://127.0.0.1:2379",
			want:     "https://127.0.0.1:2379",
		},
		{
			desc:     "nats",
			endpoint: "nats://nats.example.com:4222?bucket=kine",
			want:     "nats://nats.example.com:4222?bucket=kine",
		},
		{
			desc:     "empty",
			endpoint: "",
			want:     "",
		},
		{
			desc:     "default sqlite endpoint with parameters",
			endpoint: DefaultEndpoint("/var/lib/kubestellar"),
			want:     DefaultEndpoint("/var/lib/kubestellar"),
		},
		{
			desc:       "mysql DSN without scheme",
			endpoint:   "kine:s3cret@tcp(db.example.com:3306)/kine",
			secretOnly: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := Redact(tc.endpoint)
			if tc.secretOnly {
				require.Contains(t, got, "tcp(db.example.com:3306)/kine", "the host stays visible")
			} else {
				require.Equal(t, tc.want, got)
			}
			for _, secret := range []string{"s3cret", "p@ss", "p1", "p2"} {
				if strings.Contains(tc.endpoint, secret) {
					require.NotContains(t, got, secret)
				}
			}
		})
	}
}

func TestDefaultEndpoint(t *testing.T) {
	require.Equal(t, "sqlite:///data/db/state.db?"+SQLiteParams, DefaultEndpoint("/data"))
	require.Equal(t, "sqlite://rel/db/state.db?"+SQLiteParams, DefaultEndpoint("rel"))
}

func TestResourcePrefix(t *testing.T) {
	tests := []struct {
		gr   schema.GroupResource
		want string
	}{
		{gr: schema.GroupResource{Resource: "configmaps"}, want: "/core/configmaps"},
		{gr: schema.GroupResource{Resource: "namespaces"}, want: "/core/namespaces"},
		{gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, want: "/apps/deployments"},
		{gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, want: "/rbac.authorization.k8s.io/clusterroles"},
		{gr: schema.GroupResource{Group: "tenancy.kubestellar.io", Resource: "spaces"}, want: "/tenancy.kubestellar.io/spaces"},
		{gr: schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, want: "/apiextensions.k8s.io/customresourcedefinitions"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, ResourcePrefix(tc.gr))
		})
	}
}

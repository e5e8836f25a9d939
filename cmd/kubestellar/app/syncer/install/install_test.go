package install

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultKubeconfig(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".kube"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".kube", "config"), nil, 0o600))
	wd, err := os.Getwd()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, env, home string
		homeErr         error
		want, from, err string
	}{
		{name: "from $KUBECONFIG, made absolute", env: "edge.kubeconfig", home: home, want: filepath.Join(wd, "edge.kubeconfig"), from: "$KUBECONFIG"},
		{name: "$KUBECONFIG with empty entries", env: ":/etc/edge.kubeconfig:", home: home, want: "/etc/edge.kubeconfig", from: "$KUBECONFIG"},
		{name: "$KUBECONFIG naming several", env: "/a:/b", home: home, err: "names 2 files"},
		{name: "from home", home: home, want: filepath.Join(home, ".kube", "config"), from: "~/.kube/config"},
		{name: "none", home: t.TempDir()},
		{name: "no home", homeErr: errors.New("no home")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{
				getenv:  func(string) string { return tc.env },
				homeDir: func() (string, error) { return tc.home, tc.homeErr },
			}
			got, from, err := o.defaultKubeconfig()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.from, from)
		})
	}
}

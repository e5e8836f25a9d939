// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnits(t *testing.T) {
	common := []string{
		"Type=notify", "NotifyAccess=main", "Restart=on-failure", "RestartSec=5s", "TimeoutStartSec=0",
		"LimitNOFILE=1048576", "TasksMax=infinity", "Wants=network-online.target", "After=network-online.target",
		"Documentation=" + DocumentationURL, "WantedBy=multi-user.target",
	}
	server, err := ServerUnit("/usr/bin/kubestellar")
	require.NoError(t, err)
	syncer, err := SyncerUnit("/usr/bin/kubestellar")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		unit string
		want []string
	}{
		{"server", server, append([]string{
			"ExecStart=/usr/bin/kubestellar server start $KUBESTELLAR_ARGS",
			"EnvironmentFile=-/etc/kubestellar/server.env",
		}, common...)},
		{"syncer", syncer, append([]string{
			"ExecStart=/usr/bin/kubestellar syncer join $KUBESTELLAR_SYNCER_ARGS",
			"EnvironmentFile=/etc/kubestellar/syncer-%i.env",
		}, common...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(tc.unit, "\n")
			for _, want := range tc.want {
				require.Contains(t, lines, want)
			}
			// The default KillMode (control-group) stops every process of
			// the service; nothing of ours may outlive it.
			require.NotContains(t, tc.unit, "KillMode")
			for _, section := range []string{"[Unit]", "[Service]", "[Install]"} {
				require.Contains(t, lines, section)
			}
		})
	}
}

func TestExecPath(t *testing.T) {
	for _, tc := range []struct {
		binary, want, err string
	}{
		{binary: "/usr/bin/kubestellar", want: "/usr/bin/kubestellar"},
		{binary: "/opt/my tools/kubestellar", want: "'/opt/my tools/kubestellar'"},
		{binary: "/opt/100%/$x/kubestellar", want: "/opt/100%%/$$x/kubestellar"},
		{binary: "bin/kubestellar", err: "not absolute"},
		{binary: `/opt/it's/kubestellar`, err: "quote"},
		{binary: "/opt/a\nb", err: "control"},
	} {
		t.Run(tc.binary, func(t *testing.T) {
			got, err := execPath(tc.binary)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			unit, err := ServerUnit(tc.binary)
			require.NoError(t, err)
			require.Contains(t, unit, "\nExecStart="+tc.want+" server start $KUBESTELLAR_ARGS\n")
		})
	}
}

func TestServerEnvExampleIsInert(t *testing.T) {
	vars, err := ParseEnvFile([]byte(ServerEnvExampleText()))
	require.NoError(t, err)
	require.Empty(t, vars, "the example must set nothing")
}

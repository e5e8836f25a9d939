// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"fmt"
	"path"
	"strings"
	"unicode"

	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/syncer"
)

// Where the units and their environment files live, and what they are called.
const (
	// UnitDir is where install writes units (the package puts its own in
	// PackageUnitDir; units in UnitDir take precedence).
	UnitDir = "/etc/systemd/system"
	// PackageUnitDir is where the Debian package installs its units.
	PackageUnitDir = "/lib/systemd/system"
	// ConfigDir holds the environment files.
	ConfigDir = "/etc/kubestellar"

	// ServerUnitName is the server's unit.
	ServerUnitName = "kubestellar.service"
	// ServerEnvFile holds the flags of `kubestellar server start`, and its
	// secrets (server.TokenEnv, server.DatastoreEndpointEnv).
	ServerEnvFile = ConfigDir + "/server.env"
	// ServerEnvExample is the commented example the package ships.
	ServerEnvExample = ConfigDir + "/server.env.example"
	// ServerArgsVar is the variable of ServerEnvFile that ExecStart expands.
	ServerArgsVar = "KUBESTELLAR_ARGS"
	// DefaultServerDataDir is the data dir of the service (it runs as root).
	DefaultServerDataDir = "/var/lib/kubestellar"

	// SyncerTemplateName is the syncer's template unit; one instance per
	// SyncTarget, kubestellar-syncer@NAME.service.
	SyncerTemplateName = "kubestellar-syncer@.service"
	// SyncerArgsVar is the variable of a syncer's environment file that
	// ExecStart expands.
	SyncerArgsVar = "KUBESTELLAR_SYNCER_ARGS"
	// SyncerDataDirParent holds the data dir of each syncer service.
	SyncerDataDirParent = "/var/lib/kubestellar-syncer"

	// DocumentationURL is the README section about the services.
	DocumentationURL = "https://github.com/kubestellar/kubestellar#install-as-a-service"
)

// SyncerUnitName is the unit of the syncer of one SyncTarget.
func SyncerUnitName(syncTarget string) string {
	return "kubestellar-syncer@" + syncTarget + ".service"
}

// SyncerEnvFile holds the flags of `kubestellar syncer join` for one
// SyncTarget, and its join token (syncer.TokenEnv).
func SyncerEnvFile(syncTarget string) string {
	return path.Join(ConfigDir, "syncer-"+syncTarget+".env")
}

// ServerUnit is kubestellar.service running binary, an absolute path.
func ServerUnit(binary string) (string, error) {
	exe, err := execPath(binary)
	if err != nil {
		return "", err
	}
	return `# kubestellar server, written by kubestellar (server install, or the package).
# Its flags are in ` + ServerEnvFile + ` (` + ServerArgsVar + `), and its secrets too, as
# the variables it reads from its environment, never on its command line
# (` + server.DatastoreEndpointEnv + `, ` + server.TokenEnv + `); after editing them:
#   systemctl restart ` + ServerUnitName + `
[Unit]
Description=KubeStellar server: edge and multi-cluster control plane
Documentation=` + DocumentationURL + `
Wants=network-online.target
After=network-online.target

[Service]
# The server says READY=1 once it serves, with its controllers running.
Type=notify
NotifyAccess=main
EnvironmentFile=-` + ServerEnvFile + `
ExecStart=` + exe + ` server start $` + ServerArgsVar + `
Restart=on-failure
RestartSec=5s
# The first start makes certificates, and an external datastore may be slow
# to answer: wait for READY rather than kill a server on its way up.
TimeoutStartSec=0
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity

[Install]
WantedBy=multi-user.target
`, nil
}

// SyncerUnit is the template kubestellar-syncer@.service running binary, an
// absolute path; the instance name is the SyncTarget.
func SyncerUnit(binary string) (string, error) {
	exe, err := execPath(binary)
	if err != nil {
		return "", err
	}
	return `# kubestellar syncer of SyncTarget %i, written by kubestellar (syncer install,
# or the package). Its flags are in ` + ConfigDir + `/syncer-%i.env (` + SyncerArgsVar + `),
# and its join token too, as ` + syncer.TokenEnv + `, which it reads from its environment,
# never on its command line; after editing them:
#   systemctl restart kubestellar-syncer@%i.service
[Unit]
Description=KubeStellar syncer of SyncTarget %i
Documentation=` + DocumentationURL + `
Wants=network-online.target
After=network-online.target

[Service]
# The syncer says READY=1 once it keeps the edge: connected to the center,
# or with its saved state loaded.
Type=notify
NotifyAccess=main
EnvironmentFile=` + ConfigDir + `/syncer-%i.env
ExecStart=` + exe + ` syncer join $` + SyncerArgsVar + `
Restart=on-failure
RestartSec=5s
# The center may be out of reach for long; the syncer waits for it.
TimeoutStartSec=0
LimitNOFILE=1048576
TasksMax=infinity

[Install]
WantedBy=multi-user.target
`, nil
}

// ServerEnvExampleText is the content of ServerEnvExample.
func ServerEnvExampleText() string {
	return `# Flags of ` + "`kubestellar server start`" + ` for ` + ServerUnitName + `, and its secrets, for example:
#
#   ` + ServerArgsVar + `="--data-dir=` + DefaultServerDataDir + ` --port=6443 --tls-san=center.example.com"
#   ` + server.DatastoreEndpointEnv + `="postgres://ks:password@db.example.com:5432/kubestellar"
#   ` + server.TokenEnv + `="secret shared by the servers of the cluster"
#
# The secrets are variables that the server reads from its environment
# (they stand for --datastore-endpoint and --token), never flags: the
# flags end up on its command line, which every user of the machine reads.
# ` + "`kubestellar server install [flags]`" + ` checks the flags, writes them and the
# secrets to ` + ServerEnvFile + ` (mode 0600) and enables the service.
# Without that file the server runs with its defaults (data in
# ` + DefaultServerDataDir + `, port 6443).
`
}

// execPath is binary as the first word of ExecStart=. Specifiers (%) and
// variables ($) are escaped, and a path with spaces is quoted; quotes and
// backslashes, which no sane install path holds, are refused.
func execPath(binary string) (string, error) {
	if !path.IsAbs(binary) {
		return "", fmt.Errorf("the binary path %q is not absolute", binary)
	}
	if strings.ContainsAny(binary, `"'\`) || strings.ContainsFunc(binary, unicode.IsControl) {
		return "", fmt.Errorf("the binary path %q holds a quote, backslash or control character", binary)
	}
	p := strings.NewReplacer("%", "%%", "$", "$$").Replace(binary)
	if strings.ContainsFunc(p, unicode.IsSpace) {
		p = "'" + p + "'"
	}
	return p, nil
}

// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package packaging installs kubestellar as a system service, the way k3s
// does: systemd units of Type=notify (the server and the syncer say READY
// only once they are), with the flags of `server start` and `syncer join`
// kept in environment files under /etc/kubestellar.
//
// The same functions render the units for `kubestellar server install`,
// `kubestellar syncer install` and the Debian package (hack/gen-units), so
// the three never drift apart. Flags are validated by parsing them with the
// real options of the commands the units run, so a typo fails at install
// time, naming the flag, rather than at the first start.
//
// Everything that touches the machine goes through a Host: its Root prefixes
// every path (tests and package builds write into a directory), and its
// Systemd field is how systemctl is reached, so tests need no systemd.
package packaging

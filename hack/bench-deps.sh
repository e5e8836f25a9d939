#!/usr/bin/env bash
# Installs the Debian packages the benchmarks use, where missing, before
# anything is measured (make bench-deps; make bench runs it first, and so
# can any long run that needs the same, such as a soak test): the
# datastore section runs PostgreSQL and MariaDB servers, as their own users
# when run as root (runuser), and the dashboard section times the fleet
# view's first render in chromium. As root it installs them with apt-get;
# otherwise it says what to install. The test edge cluster's binaries
# (etcd among them) are built by `make edgecluster-tools`, which
# `make bench-deps` runs too; the standalone kine (after gcc) and
# konnectivity are built here.
set -euo pipefail
source "$(dirname "$0")/lib/deps.sh"
ensure_packages "the benchmarks" gcc:gcc runuser:util-linux mariadbd:mariadb-server mariadb-install-db:mariadb-server \
  '/usr/lib/postgresql/*/bin/initdb:postgresql' chromium:chromium
# The standalone kine that `make bench` runs the stock kube-apiserver on (the
# stock section), built with cgo, as kubestellar is, once per machine.
cd "$(dirname "$0")/.."
"${GO:-go}" run ./test/edgecluster/cmd/edge-cluster -build-kine >/dev/null
# konnectivity's proxy-server and proxy-agent, the reference the forwarding
# section measures the tunnel against, once per machine.
"${GO:-go}" run ./test/edgecluster/cmd/edge-cluster -build-konnectivity >/dev/null

#!/usr/bin/env bash
# Installs the Debian packages the tests use, where missing: the test
# edge cluster is built from Go modules, but the end-to-end tests also run
# a real HTTP proxy (squid), a TLS-terminating load balancer (nginx),
# PostgreSQL and MariaDB servers, systemd-analyze and dpkg-deb, a headless
# browser for the dashboard (chromium), and make network namespaces
# (iproute2). As root it installs them with apt-get; otherwise
# it says what to install.
set -euo pipefail
source "$(dirname "$0")/lib/deps.sh"
ensure_packages "the tests" gcc:gcc make:make git:git systemd-analyze:systemd dpkg-deb:dpkg squid:squid nginx:nginx \
  ip:iproute2 runuser:util-linux mariadbd:mariadb-server '/usr/lib/postgresql/*/bin/initdb:postgresql' \
  chromium:chromium

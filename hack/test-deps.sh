#!/usr/bin/env bash
# Installs the Debian packages the tests use, where missing: the test
# edge cluster is built from Go modules, but the end-to-end tests also run
# a real HTTP proxy (squid), a TLS-terminating load balancer (nginx),
# PostgreSQL and MariaDB servers, systemd-analyze and dpkg-deb, and make network
# namespaces (iproute2). As root it installs them with apt-get; otherwise
# it says what to install.
set -euo pipefail
missing=()
for pkg_cmd in gcc:gcc make:make git:git systemd-analyze:systemd dpkg-deb:dpkg squid:squid nginx:nginx ip:iproute2 runuser:util-linux mariadbd:mariadb-server; do
  cmd=${pkg_cmd%%:*}
  command -v "$cmd" >/dev/null || [ -x "/usr/sbin/$cmd" ] || missing+=("${pkg_cmd##*:}")
done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "the tests need these Debian packages: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing test dependencies: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"

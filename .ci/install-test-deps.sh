#!/usr/bin/env bash
# Debian packages the tests use beyond npm: HAProxy, which
# test/integration/haproxy-recipe.test.ts (and bench/cluster.bench.ts) run in
# front of several server instances. The test installs it itself when missing;
# doing it here first keeps that out of the test's time.
set -euo pipefail
if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y haproxy
fi
/usr/sbin/haproxy -v | head -n 1

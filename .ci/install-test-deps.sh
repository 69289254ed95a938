#!/usr/bin/env bash
# Debian packages the tests use beyond npm, installed once before npm test:
# - haproxy: test/integration/haproxy-recipe.test.ts (and bench/cluster.bench.ts)
#   run it in front of several server instances, and test/docs/doc-commands.test.ts
#   runs docs/scaling-out.md's one-host recipe with it; the tests install it
#   themselves when missing, doing it here keeps that out of the tests' time.
# - strace: test/integration/telemetry.test.ts traces the server's connections;
#   without it that one check is skipped, saying why.
set -euo pipefail
missing=()
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v strace >/dev/null 2>&1 || missing+=(strace)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# sed reads to the end: head closes the pipe after one line, and with pipefail a tool
# still writing then fails the script on SIGPIPE (exit 141).
/usr/sbin/haproxy -v | sed -n 1p
strace -V | sed -n 1p

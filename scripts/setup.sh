#!/usr/bin/env bash
# Installs everything polish needs on a fresh Debian machine, then builds it. polish runs on
# Node 24: when the machine's node is older than 22 (or missing), Node 24 is installed from the
# npm registry into ./.node and put first on PATH (scripts/use-node.sh); the system's node stays.
# `bash scripts/setup.sh demo` also runs the demo afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

PNPM_VERSION=12.4.2
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need_debian=()
# npm is what installs Node 24 (and pnpm); Debian's nodejs brings it when there is no node at all.
command -v node >/dev/null 2>&1 || need_debian+=(nodejs)
command -v npm >/dev/null 2>&1 || need_debian+=(npm)
command -v nats-server >/dev/null 2>&1 || need_debian+=(nats-server)
# The inspector's browser tests drive Debian's chromium (never a browser download).
[ -x /usr/bin/chromium ] || need_debian+=(chromium)
# The multi-host test builds network namespaces with `ip netns` (as root).
command -v ip >/dev/null 2>&1 || need_debian+=(iproute2)
# `polish nats-config --tls` makes its CA and certificates with openssl.
command -v openssl >/dev/null 2>&1 || need_debian+=(openssl)
# The multi-host test captures the traffic on its links with tcpdump and searches the capture.
command -v tcpdump >/dev/null 2>&1 || need_debian+=(tcpdump)
if [ ${#need_debian[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_debian[*]}" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_debian[@]}" >/dev/null
fi

if [ "$(pnpm --version 2>/dev/null || true)" != "$PNPM_VERSION" ]; then
  echo "setup: installing pnpm $PNPM_VERSION with npm" >&2
  as_root npm install -g --silent "pnpm@$PNPM_VERSION"
fi

# After pnpm's global install (npm's global prefix follows the node that runs it), Node 24 goes
# first on PATH for everything below: pnpm runs scripts and tests with the node on PATH.
source scripts/use-node.sh
echo "setup: node $(node --version) ($(command -v node))" >&2

echo "setup: installing dependencies and building" >&2
pnpm install --frozen-lockfile --reporter=silent
pnpm --silent build

if [ "${1:-}" = demo ]; then
  exec node packages/cli/dist/bin.js demo
fi

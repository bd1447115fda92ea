# Sourced (never run): puts Node 24 first on PATH when the machine's node is older than 22.
#   source scripts/use-node.sh
# Node 24 comes from the npm registry as the `node` package, installed under <repo>/.node
# (never `npm i -g`, which would replace the system's own node binary). Idempotent: a second
# source finds .node already installed and first on PATH.

POLISH_NODE_VERSION=24
polish_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
polish_node_bin="$polish_repo/.node/node_modules/.bin"

polish_node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if [ "$(polish_node_major)" -lt 22 ]; then
  if [ ! -x "$polish_node_bin/node" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "use-node: npm is needed to install Node $POLISH_NODE_VERSION (run scripts/setup.sh)" >&2
      return 1
    fi
    echo "use-node: installing Node $POLISH_NODE_VERSION into $polish_repo/.node" >&2
    npm install --prefix "$polish_repo/.node" --no-audit --no-fund --silent "node@$POLISH_NODE_VERSION" || return 1
  fi
  export PATH="$polish_node_bin:$PATH"
  hash -r
fi
unset polish_repo polish_node_bin
unset -f polish_node_major

#!/usr/bin/env node
// The `polish` command's entry. It checks the Node version before loading anything else, so that an
// old node gets one clear line instead of a syntax or missing-API error from deep inside a
// dependency. It imports nothing at the top for the same reason.

/** The oldest Node major polish runs on (package.json "engines"); 24, the current LTS, is what setup installs. */
const OLDEST_NODE = 22;
/** EXIT.SETUP in exit-codes.ts ("cannot start"), not imported: that module loads the protocol's dependencies. */
const EXIT_SETUP = 6;

const major = Number(process.versions.node.split('.')[0]);
if (major < OLDEST_NODE) {
  process.stderr.write(
    `polish needs Node.js ${OLDEST_NODE} or newer (24 recommended); this is v${process.versions.node}. ` +
      'Run scripts/setup.sh or install Node 24.\n',
  );
  process.exit(EXIT_SETUP);
}

// The compile cache first: the command's hundreds of modules then load from V8's cached bytecode.
const { enableCompileCache } = await import('@polish/agents/compile-cache');
enableCompileCache();
await import('./main.js');

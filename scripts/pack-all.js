// `pnpm pack:all`: builds, then packs every package into dist-packages/, one tarball
// each, ready for `npm install dist-packages/*.tgz` (README, Install). pnpm pack writes the real
// versions in place of `workspace:*`, which npm would not understand.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const destination = `${root}dist-packages`;
const PACKAGES = ['protocol', 'orchestrator', 'agents', 'inspector', 'cli'];

// Builds first, unless the caller says the checkout is built (the install test: the suite built it,
// and a rebuild mid-suite would replace the worker files under the workers of other tests).
if (process.env.POLISH_BUILT !== '1') execFileSync('pnpm', ['build'], { cwd: root, stdio: 'inherit' });
rmSync(destination, { recursive: true, force: true });
mkdirSync(destination);
for (const name of PACKAGES)
  execFileSync('pnpm', ['pack', '--pack-destination', destination], {
    cwd: `${root}packages/${name}`,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
const tarballs = readdirSync(destination).filter((file) => file.endsWith('.tgz'));
if (tarballs.length !== PACKAGES.length)
  throw new Error(`expected ${PACKAGES.length} tarballs in ${destination}, found: ${tarballs.join(', ') || 'none'}`);
console.log(`packed ${tarballs.length} packages into dist-packages/: ${tarballs.join(' ')}`);

// The worker's V8 startup snapshot (packages/agents/dist/worker-snapshot/worker.blob) ships in the
// package: nothing of the machine that built it may be in it. The build checks its environment
// with a canary (scripts/bundle-worker.js); this checks where it was built.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REPO } from './support/cli.js';

const blob = `${REPO}packages/agents/dist/worker-snapshot/worker.blob`;

describe('worker startup snapshot', () => {
  it('does not name the folder it was built in', () => {
    // V8 keeps the name of the snapshot's script (for stack traces) and Node the builder's command
    // line (its node's path, the blob's path, argv0): built inside the checkout, or by a node
    // under it, they put the builder's path (/home/<user>/…) in every installed copy.
    const checkout = REPO.replace(/\/$/, '');
    const bytes = readFileSync(blob);
    const at = bytes.indexOf(checkout);
    expect(at, at < 0 ? '' : bytes.subarray(at, at + 120).toString('latin1')).toBe(-1);
  });
});

import { accessSync, constants, mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { invalidInput } from '@polish/protocol';

const reason = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;

/**
 * Makes the state folder and a fresh store folder in it, one component at a time (Node's
 * recursive mkdir never returns on some pseudo file systems, /proc among them). A folder that
 * cannot be made or written is bad input naming the path and why (exit 2), before anything runs.
 */
export function makeStoreDir(stateDir: string): string {
  const target = resolve(stateDir);
  const missing: string[] = [];
  let existing = target;
  for (;;) {
    try {
      if (!statSync(existing).isDirectory()) throw invalidInput('state-dir', `${existing} is not a folder`);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        if ((error as { field?: string }).field) throw error;
        throw invalidInput('state-dir', `cannot use ${existing} (${reason(error)})`);
      }
      missing.unshift(existing);
      const parent = dirname(existing);
      if (parent === existing) throw invalidInput('state-dir', `cannot use ${target}`);
      existing = parent;
    }
  }
  for (const folder of missing) {
    try {
      mkdirSync(folder);
    } catch (error) {
      // Another polish process starting at the same moment made it first: as good as made here.
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw invalidInput('state-dir', `cannot create ${folder} (${reason(error)})`);
    }
  }
  try {
    accessSync(target, constants.W_OK | constants.X_OK);
    return mkdtempSync(join(target, 'nats-'));
  } catch (error) {
    throw invalidInput('state-dir', `cannot write in ${target} (${reason(error)})`);
  }
}

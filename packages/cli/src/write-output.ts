import { accessSync, constants, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeCoordFileAtomic } from '@polish/orchestrator';
import { InputError } from './input-error.js';

/** Checks before a run that `--out` can be written, so a finished run never has nowhere to go. */
export function checkWritable(path: string): void {
  let isDirectory = false;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch {
    // Not there yet: its folder decides.
  }
  if (isDirectory) throw new InputError('out', `${path} is a directory; name a file`);
  try {
    accessSync(dirname(path), constants.W_OK);
  } catch (error) {
    throw new InputError(
      'out',
      `cannot write in ${dirname(path)} (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}

/** Writes a file whole or not at all: a temp file beside it, then a rename. */
export const writeFileAtomic = writeCoordFileAtomic;

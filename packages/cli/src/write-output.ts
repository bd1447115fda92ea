import { accessSync, constants, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { invalidInput } from '@polish/protocol';

/** Checks before a run that `--out` can be written, so a finished run never has nowhere to go. */
export function checkWritable(path: string): void {
  let isDirectory = false;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch {
    // Not there yet: its folder decides.
  }
  if (isDirectory) throw invalidInput('out', `${path} is a directory; name a file`);
  try {
    accessSync(dirname(path), constants.W_OK);
  } catch (error) {
    throw invalidInput('out', `cannot write in ${dirname(path)} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

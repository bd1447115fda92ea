import { accessSync, constants, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, basename, join } from 'node:path';
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
    throw new InputError('out', `cannot write in ${dirname(path)} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/** Writes a file whole or not at all: a temp file beside it, then a rename. */
export function writeFileAtomic(path: string, text: string): void {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    writeFileSync(temporary, text);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

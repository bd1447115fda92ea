import { renameSync, writeFileSync } from 'node:fs';
import { dirname, basename, join } from 'node:path';

/** Writes a file whole or not at all: a temp file beside it, then a rename. */
export function writeFileAtomic(path: string, text: string): void {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  writeFileSync(temporary, text);
  renameSync(temporary, path);
}

import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

export interface AtomicWriteOptions {
  /** The new file's mode (e.g. 0o600 for secrets). */
  mode?: number;
  /** Fsync the bytes and the folder entry, so the file survives a power cut once this returns. */
  durable?: boolean;
  /** False: never replace an existing file (link instead of rename); an existing one throws EEXIST. */
  overwrite?: boolean;
}

/**
 * Writes a file whole or not at all: a new temp file beside it (its name unique to this
 * process and call), then a rename (or a link, to create without overwriting), so a reader
 * never sees half a file and two writers never share a temp file.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, options: AtomicWriteOptions = {}): void {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const fd = openSync(temporary, 'wx', options.mode ?? 0o666);
    try {
      writeFileSync(fd, data);
      if (options.durable) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (options.overwrite === false) linkSync(temporary, path);
    else renameSync(temporary, path);
  } finally {
    rmSync(temporary, { force: true });
  }
  if (options.durable) syncFolder(path);
}

/** Fsyncs the folder holding `path`, so a rename or link in it is on disk. */
function syncFolder(path: string): void {
  const fd = openSync(dirname(path), 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

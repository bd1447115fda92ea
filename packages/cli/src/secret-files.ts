import { closeSync, fchmodSync, lstatSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { invalidInput } from '@polish/protocol';

// Files that hold a secret (passwords, seeds, private keys, a server configuration naming
// users) are readable by their owner only, whatever the umask, in folders only the owner can
// list. They are never overwritten: a file that exists already keeps its bytes and its mode.

const mode = (path: string) => (lstatSync(path).mode & 0o777).toString(8).padStart(4, '0');

/**
 * Makes `dir` (and missing parents) and makes sure only its owner can enter it: a folder
 * polish creates is 0700; one that exists already is refused, not changed (it may be the user's
 * own folder), when it is open to others or belongs to another user (who could read what is
 * written there, or swap it).
 */
export function makePrivateDir(dir: string, field = 'dir'): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) throw invalidInput(field, `${dir} is not a folder`);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid)
    throw invalidInput(
      field,
      `${dir} belongs to another user (uid ${stat.uid}, this process runs as uid ${uid}): secrets go only in a folder of your own (name a new one)`,
    );
  if ((stat.mode & 0o077) !== 0)
    throw invalidInput(
      field,
      `${dir} is open to other users (mode ${mode(dir)}): secrets go only in a folder of mode 0700 (chmod 700 it, or name a new one)`,
    );
}

/**
 * Creates `path` with `text` and exactly `fileMode` (0600 for a secret, whatever the umask);
 * refuses when it exists, and leaves that file as it was.
 */
export function writeNewFile(path: string, text: string, fileMode: number, field = 'dir'): void {
  let descriptor: number;
  try {
    descriptor = openSync(path, 'wx', fileMode);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST')
      throw invalidInput(field, `${path} exists (mode ${mode(path)}); it is left as it is: choose another folder`);
    throw error;
  }
  try {
    // The umask can only narrow the mode at creation; set it exactly.
    fchmodSync(descriptor, fileMode);
    writeSync(descriptor, text);
  } finally {
    closeSync(descriptor);
  }
}

/** Creates a file only its owner may read or write (0600), refusing to replace one that exists. */
export const writeSecretFile = (path: string, text: string, field = 'dir') => writeNewFile(path, text, 0o600, field);

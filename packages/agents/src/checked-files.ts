import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats } from 'node:fs';
import { invalidInput } from '@polish/protocol';

// Files that hold a secret (seeds, private keys, passwords) or decide whom polish trusts (the
// CA, a client certificate, a credentials file naming seed files) are opened once, checked on
// the opened descriptor (fstat) and read from that same descriptor: the bytes used are the bytes
// checked, whatever the path is made to point to in between (no stat-the-path-then-read race).

/** What kind of file a stat says it is, for an error message. */
function kindOf(stat: Stats): string {
  if (stat.isDirectory()) return 'a folder';
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isSocket()) return 'a socket';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

const octal = (mode: number) => (mode & 0o777).toString(8).padStart(4, '0');

/** A file read through one descriptor, with that descriptor's stat. */
export interface OpenedFile {
  bytes: Buffer;
  stat: Stats;
}

/** No seed, key, certificate or credentials file is near this: anything bigger is not one. */
export const MAX_CHECKED_FILE_BYTES = 1024 * 1024;

/**
 * Opens `path` once, refuses anything but a regular file, runs `check` on the descriptor's stat
 * (owner, mode) and only then reads, from the same descriptor: a file refused is never read.
 * O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOCTTY: a terminal must not become ours.
 */
export function readOpenedFile(
  path: string,
  what: string,
  field: string,
  check: (stat: Stats) => void = () => undefined,
): OpenedFile {
  let descriptor: number;
  try {
    descriptor = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    throw invalidInput(field, `cannot read ${what} ${path}: ${(error as Error).message}`);
  }
  try {
    const stat = fstatSync(descriptor);
    if (!stat.isFile())
      throw invalidInput(field, `${what} ${path} is ${kindOf(stat)}, not a regular file: name the file itself`);
    check(stat);
    if (stat.size > MAX_CHECKED_FILE_BYTES)
      throw invalidInput(
        field,
        `${what} ${path} is ${stat.size} bytes, more than such a file can be (${MAX_CHECKED_FILE_BYTES}): name the file itself`,
      );
    try {
      return { bytes: readFileSync(descriptor), stat };
    } catch (error) {
      throw invalidInput(field, `cannot read ${what} ${path}: ${(error as Error).message}`);
    }
  } finally {
    closeSync(descriptor);
  }
}

/** This process's user id, or undefined where there are none (Windows): owners are then not checked. */
const myUid = () => process.getuid?.();

/**
 * Refuses a secret that is not only this user's: owned by another user (who could read or
 * replace it), or with any group/other permission bit, as ssh refuses such a key.
 */
export function refuseSharedSecret(stat: Stats, path: string, what: string, field: string): void {
  const uid = myUid();
  if (uid !== undefined && stat.uid !== uid)
    throw invalidInput(
      field,
      `${what} ${path} belongs to another user (uid ${stat.uid}, this process runs as uid ${uid}): a secret must be owned by the user that uses it (copy it to a file of your own, mode 0600)`,
    );
  if ((stat.mode & 0o077) !== 0)
    throw invalidInput(
      field,
      `${what} ${path} is open to other users (mode ${octal(stat.mode)}): it must be readable by its owner only (chmod 600 ${path})`,
    );
}

/**
 * Refuses a file that decides trust (a CA, a certificate, a credentials file naming seeds) when
 * someone else could have changed it: owned by a user other than this one or root, or writable by
 * its group or others. Reading it is fine: it holds no secret.
 */
export function refuseUntrusted(stat: Stats, path: string, what: string, field: string): void {
  const uid = myUid();
  // Without user ids (Windows) modes say nothing of who may write: nothing to check there.
  if (uid === undefined) return;
  if (stat.uid !== uid && stat.uid !== 0)
    throw invalidInput(
      field,
      `${what} ${path} belongs to another user (uid ${stat.uid}, this process runs as uid ${uid}): it decides whom polish trusts, so it must be owned by you or root`,
    );
  if ((stat.mode & 0o022) !== 0)
    throw invalidInput(
      field,
      `${what} ${path} is writable by other users (mode ${octal(stat.mode)}): it decides whom polish trusts (chmod go-w ${path})`,
    );
}

/** The bytes of a secret file (seed, private key), checked on the descriptor they were read from. */
export function readSecretFile(path: string, what: string, field: string): Buffer {
  return readOpenedFile(path, what, field, (stat) => refuseSharedSecret(stat, path, what, field)).bytes;
}

/** The bytes of a file that decides trust (CA, certificate), checked on the descriptor they were read from. */
export function readTrustedFile(path: string, what: string, field: string): Buffer {
  return readOpenedFile(path, what, field, (stat) => refuseUntrusted(stat, path, what, field)).bytes;
}

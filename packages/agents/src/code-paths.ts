import { lstatSync, readdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, join } from 'node:path';

// Code a worker runs (the build's snapshot and bundle, the compile cache's bytecode) runs with
// the host's rights and model keys: whoever may change it, a file in it, or a folder on its way
// from `/`, may take those over. Checked as ssh checks a key's path (StrictModes).

/** The user whose files a host may run: its own, and root's. */
export interface CodeOwner {
  uid: number;
}

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, '0');

/** Why no worker may run code under this path (with what to do about it), or undefined. */
function refusal(path: string, stat: Stats, owner: CodeOwner, ancestor: boolean): string | undefined {
  if (stat.uid !== owner.uid && stat.uid !== 0)
    return `${path} belongs to another user (uid ${stat.uid}, this host runs as uid ${owner.uid}): chown it`;
  // A folder such as /tmp (sticky, root's) lets others add names but not replace ours.
  if (ancestor && stat.isDirectory() && (stat.mode & 0o1000) !== 0 && stat.uid === 0) return undefined;
  // Any group write is refused: with POSIX ACLs the group bits are the mask of every named grant.
  if ((stat.mode & 0o022) !== 0)
    return `${path} may be written by other users (mode ${octal(stat.mode)}): chmod go-w it`;
  return undefined;
}

/** The first refusal in a built folder and everything in it; the build makes no symbolic links. */
function refusalInTree(path: string, owner: CodeOwner): string | undefined {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) return `${path} is a symbolic link, which the build never makes: build again`;
  const refused = refusal(path, stat, owner, false);
  if (refused || !stat.isDirectory()) return refused;
  for (const name of readdirSync(path)) {
    const inner = refusalInTree(join(path, name), owner);
    if (inner) return inner;
  }
  return undefined;
}

/** The first refusal among the folders from `path`'s real location up to `/`. */
function refusalOnTheWay(real: string, owner: CodeOwner): string | undefined {
  for (let folder = dirname(real); ; folder = dirname(folder)) {
    const refused = refusal(folder, statSync(folder), owner, true);
    if (refused || dirname(folder) === folder) return refused;
  }
}

/**
 * Why a host must not start workers from `roots` (the folders `pnpm build` made), or undefined
 * when only the host's own user or root may change them: every file and folder in them, and each
 * folder from their real location up to `/`.
 */
export function untrustedWorkerCode(roots: readonly string[], owner: CodeOwner): string | undefined {
  for (const root of roots) {
    try {
      const real = realpathSync(root);
      const refused = refusalInTree(real, owner) ?? refusalOnTheWay(real, owner);
      if (refused) return refused;
    } catch (error) {
      return `cannot check ${root}: ${(error as Error).message}`;
    }
  }
  return undefined;
}

/** Why a folder above `folder` (whose own owner and mode its caller checks) may let another user swap it, or undefined. */
export function untrustedFoldersAbove(folder: string, owner: CodeOwner): string | undefined {
  try {
    return refusalOnTheWay(realpathSync(folder), owner);
  } catch (error) {
    return `cannot check ${folder}: ${(error as Error).message}`;
  }
}

/** The host's own user: none to check against where there are no users (Windows). */
export function hostCodeOwner(): CodeOwner | undefined {
  return process.geteuid ? { uid: process.geteuid() } : undefined;
}

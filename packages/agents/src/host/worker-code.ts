import { lstatSync, readdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, join } from 'node:path';

/** Whose files a host may start workers from: its own user's, or root's. */
export interface CodeOwner {
  uid: number;
  gid: number;
}

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, '0');

/** Why no worker may run code under this path, or undefined. */
function refusal(path: string, stat: Stats, owner: CodeOwner, ancestor: boolean): string | undefined {
  if (stat.uid !== owner.uid && stat.uid !== 0)
    return `${path} belongs to another user (uid ${stat.uid}, this host runs as uid ${owner.uid})`;
  // A folder such as /tmp (sticky, root's) lets others add files but not replace ours.
  const sticky = ancestor && stat.isDirectory() && (stat.mode & 0o1000) !== 0 && stat.uid === 0;
  if (sticky) return undefined;
  if ((stat.mode & 0o002) !== 0) return `${path} may be written by other users (mode ${octal(stat.mode)})`;
  // Group write is yours alone when the group is your own primary group (a user-private group).
  if ((stat.mode & 0o020) !== 0 && stat.gid !== owner.gid)
    return `${path} may be written by group ${stat.gid}, not yours (mode ${octal(stat.mode)})`;
  return undefined;
}

/** The first refusal in a built folder and everything in it; the build makes no symbolic links. */
function refusalInTree(path: string, owner: CodeOwner): string | undefined {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) return `${path} is a symbolic link, which the build never makes`;
  const refused = refusal(path, stat, owner, false);
  if (refused || !stat.isDirectory()) return refused;
  for (const name of readdirSync(path)) {
    const inner = refusalInTree(join(path, name), owner);
    if (inner) return inner;
  }
  return undefined;
}

/**
 * Why a host must not start workers from `roots` (the folders `pnpm build` made, or an entry
 * file), or undefined when only the host's own user or root may change them. Every worker runs
 * this code with the host's rights and model keys, so whoever may write it, a file in it, or a
 * folder on its way from `/`, may take those over: checked as ssh checks a key's path. Paths
 * are followed to what they point to, and each folder from there up to `/` is checked too.
 */
export function untrustedWorkerCode(roots: readonly string[], owner: CodeOwner): string | undefined {
  for (const root of roots) {
    try {
      const real = realpathSync(root);
      const inTree = refusalInTree(real, owner);
      if (inTree) return inTree;
      for (let folder = dirname(real); ; folder = dirname(folder)) {
        const refused = refusal(folder, statSync(folder), owner, true);
        if (refused) return refused;
        if (dirname(folder) === folder) break;
      }
    } catch (error) {
      return `cannot check ${root}: ${(error as Error).message}`;
    }
  }
  return undefined;
}

/** The host's own user: none to check against where there are no users (Windows). */
export function hostCodeOwner(): CodeOwner | undefined {
  return process.geteuid && process.getegid ? { uid: process.geteuid(), gid: process.getegid() } : undefined;
}

import { mkdirSync, statSync } from 'node:fs';
import module from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { hostCodeOwner, untrustedFoldersAbove } from './code-paths.js';

/**
 * The folder of polish's module compile cache: `$XDG_CACHE_HOME/polish/compile-cache`, else
 * `~/.cache/polish/compile-cache`.
 */
export function compileCacheDir(environment: NodeJS.ProcessEnv = process.env): string {
  return join(environment.XDG_CACHE_HOME || join(homedir(), '.cache'), 'polish', 'compile-cache');
}

/**
 * Turns on Node's module compile cache (Node ≥ 22.1) in a folder only this user can enter: V8
 * then reuses the bytecode of polish's modules across processes instead of compiling them again
 * in every single-use worker. Call it before the modules load (an entry that imports the rest
 * dynamically). The folder is private (0700) because its contents become code that later
 * processes run; an existing one that others could write to, or that another user owns, or
 * below a folder that others may change (as the worker's own code is checked), is not used.
 * Never throws: the cache only saves time. `NODE_DISABLE_COMPILE_CACHE=1` turns it off.
 */
export function enableCompileCache(directory: string = compileCacheDir()): string | undefined {
  try {
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    const folder = statSync(directory);
    if ((folder.mode & 0o077) !== 0 || folder.uid !== process.getuid?.()) return undefined;
    // Its bytecode is code later workers run: a folder above it that others may change could swap it.
    const owner = hostCodeOwner();
    if (owner && untrustedFoldersAbove(directory, owner)) return undefined;
    const outcome = module.enableCompileCache?.(directory);
    return outcome?.status === module.constants.compileCacheStatus.ENABLED ? outcome.directory : undefined;
  } catch {
    return undefined;
  }
}

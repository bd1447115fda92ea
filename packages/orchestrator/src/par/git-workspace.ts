import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { invalidInput } from '@polish/protocol';

// `polish par --git`: each cycle of a PAR run is a commit of the workspace folder.

const run = promisify(execFile);

async function git(workspace: string, args: string[]): Promise<string> {
  const { stdout } = await run('git', ['-C', workspace, ...args]);
  return stdout.trim();
}

/** Checks before a `--git` run that the workspace is a work tree, so no cycle is left uncommitted. */
export async function checkGitWorkspace(workspace: string): Promise<void> {
  try {
    if ((await git(workspace, ['rev-parse', '--is-inside-work-tree'])) !== 'true') throw new Error('not a work tree');
  } catch {
    throw invalidInput('git', `${workspace} is not a git work tree (run \`git init\` there, or drop --git)`);
  }
}

/** Commits everything in the workspace folder (and nothing outside it) with this message. */
export async function commitWorkspace(workspace: string, message: string): Promise<void> {
  // Only the workspace: a workspace inside a larger repository never commits the rest of it.
  await git(workspace, ['add', '-A', '--', '.']);
  // An identity of our own only where none is configured, so a user's own stays theirs.
  const configured = await git(workspace, ['config', 'user.email']).catch(() => '');
  const identity = configured ? [] : ['-c', 'user.name=polish', '-c', 'user.email=polish@localhost'];
  await git(workspace, [...identity, 'commit', '--allow-empty', '--no-verify', '-q', '-m', message, '--', '.']);
}

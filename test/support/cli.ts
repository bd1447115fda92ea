import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const POLISH = `${REPO}packages/cli/dist/bin.js`;

/** The demo example: an artifact, its goal and criteria, and a script that converges at iteration 3. */
export const DEMO = `${REPO}examples/demo`;
export const DEMO_GOAL = readFileSync(`${DEMO}/goal.txt`, 'utf8').trim();
/** The roles of the demo run's tasks, in order: criteria, then evaluate and revise until the third evaluation passes. */
export const DEMO_TASK_ROLES = ['criteria', 'evaluate', 'revise', 'evaluate', 'revise', 'evaluate'];

/** `polish run` on an artifact (default: the demo's) with the demo's goal and criteria, then `extra`. */
export const demoRunArgs = (extra: string[] = [], artifact = `${DEMO}/artifact.md`) => [
  'run',
  artifact,
  '--goal',
  DEMO_GOAL,
  '--criteria',
  `${DEMO}/criteria.json`,
  ...extra,
];

export interface CliOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built `polish` as a child process and collects its output. */
export function polish(
  args: string[],
  options: { input?: string; cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<CliOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [POLISH, ...args], {
      cwd: options.cwd ?? REPO,
      env: options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

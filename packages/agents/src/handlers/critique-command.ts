import { spawn } from 'node:child_process';
import { chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PolishError, ZERO_USAGE, type ParCommandPayload, type ParCommandResult } from '@polish/protocol';
import type { HandlerOutput } from './handler.js';
import { SANDBOX_GID, SANDBOX_UID, commandEnvironment, knownSecrets, planSandbox, redact } from './command-sandbox.js';

/** How much of the output comes back: the end is where test runners put their verdict. */
export const OUTPUT_TAIL_CHARS = 4000;

/** What the worker's operator decides about the commands its workers run. */
export interface CommandSettings {
  /** Run commands even where no sandbox can be made (no namespaces). Default false: refused. */
  allowUnsandboxed?: boolean;
  /** Environment variables the command may see besides PATH, LANG, LC_ALL, TZ and TERM. */
  env?: readonly string[];
}

/**
 * `par.command`: writes the artifact to a fresh temporary workspace and runs the command there
 * with `sh -c` in a sandbox (command-sandbox.ts): its own PID, mount, IPC and UTS namespaces, an
 * unprivileged user, an allow-listed environment. At the timeout the sandbox is killed, and
 * every process the command started dies with it. Known secret values are cut out of what it
 * printed before that goes anywhere. The exit code and the output's tail are the evidence; the
 * workspace is removed afterwards. No model is called.
 */
export async function runCritiqueCommand(
  payload: ParCommandPayload,
  environment: NodeJS.ProcessEnv = process.env,
  settings: CommandSettings = {},
): Promise<HandlerOutput<ParCommandResult>> {
  const sandbox = planSandbox(environment);
  if (sandbox.kind === 'none' && !settings.allowUnsandboxed) {
    throw new PolishError(
      'UNAVAILABLE',
      'this worker cannot sandbox critique commands (no user and PID namespaces: util-linux unshare is missing or not permitted); ' +
        'start its host with --allow-unsandboxed to run them without a sandbox',
    );
  }
  const workspace = await mkdtemp(join(tmpdir(), 'polish-par-'));
  try {
    for (const [path, content] of Object.entries(payload.artifact)) {
      const target = join(workspace, path);
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, content);
    }
    if (sandbox.dropsToUser) await handOver(workspace, Object.keys(payload.artifact));
    const env = commandEnvironment(environment, settings.env ?? [], workspace);
    const secrets = knownSecrets(environment, env);
    const started = Date.now();
    const outcome = await new Promise<{ code: number | null; timedOut: boolean; output: string }>((resolve) => {
      const [program, ...args] = sandbox.argv(payload.command);
      const child = spawn(program as string, args, {
        cwd: workspace,
        env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      let timedOut = false;
      // Keep only the end, so a chatty command cannot exhaust memory.
      const collect = (chunk: Buffer) => {
        output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS * 4);
      };
      child.stdout.on('data', collect);
      child.stderr.on('data', collect);
      const killGroup = () => {
        try {
          if (child.pid) process.kill(-child.pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup();
      }, payload.timeout_ms);
      // The command has its own process group, so it would outlive this worker: a worker told to
      // stop (the run was interrupted) takes the command down with it.
      process.once('SIGTERM', killGroup);
      const done = () => {
        clearTimeout(timer);
        process.off('SIGTERM', killGroup);
      };
      child.on('error', (error) => {
        done();
        resolve({ code: null, timedOut: false, output: `could not start sh: ${error.message}` });
      });
      child.on('close', (code) => {
        done();
        resolve({ code, timedOut, output });
      });
    });
    return {
      value: {
        exit_code: outcome.code,
        timed_out: outcome.timedOut,
        output_tail: redact(outcome.output, secrets).slice(-OUTPUT_TAIL_CHARS),
        duration_ms: Date.now() - started,
      },
      usage: ZERO_USAGE,
    };
  } finally {
    await rm(workspace, { recursive: true, force: true });
  }
}

/** Gives the workspace (its folders and the files written) to the unprivileged user the command runs as. */
async function handOver(workspace: string, paths: readonly string[]): Promise<void> {
  const owned = new Set([workspace]);
  for (const path of paths) {
    for (let target = join(workspace, path); target.startsWith(`${workspace}/`); target = dirname(target))
      owned.add(target);
  }
  for (const target of owned) await chown(target, SANDBOX_UID, SANDBOX_GID);
}

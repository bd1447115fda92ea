import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ZERO_USAGE, type ParCommandPayload, type ParCommandResult } from '@polish/protocol';
import type { HandlerOutput } from './handler.js';

/** How much of the output comes back: the end is where test runners put their verdict. */
export const OUTPUT_TAIL_CHARS = 4000;

/** Secrets stay in this process: the command gets the environment without keys (DESIGN §5). */
function commandEnvironment(environment: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(environment).filter(
      ([name]) => !/(_API_KEY|_TOKEN|_SECRET|^AGENT_COLLAB_HUMAN_KEYS_JSON|^POLISH_WORKER_CONFIG)$/.test(name),
    ),
  );
}

/**
 * `par.command`: writes the artifact to a fresh temporary workspace, runs the command there with
 * `sh -c` in its own process group, and kills the group at the timeout. The exit code and the
 * output's tail are the evidence; the workspace is removed afterwards. No model is called.
 */
export async function runCritiqueCommand(
  payload: ParCommandPayload,
  environment: NodeJS.ProcessEnv = process.env,
): Promise<HandlerOutput<ParCommandResult>> {
  const workspace = await mkdtemp(join(tmpdir(), 'polish-par-'));
  try {
    for (const [path, content] of Object.entries(payload.artifact)) {
      const target = join(workspace, path);
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, content);
    }
    const started = Date.now();
    const outcome = await new Promise<{ code: number | null; timedOut: boolean; output: string }>((resolve) => {
      const child = spawn('sh', ['-c', payload.command], {
        cwd: workspace,
        env: commandEnvironment(environment),
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
        output_tail: outcome.output.slice(-OUTPUT_TAIL_CHARS),
        duration_ms: Date.now() - started,
      },
      usage: ZERO_USAGE,
    };
  } finally {
    await rm(workspace, { recursive: true, force: true });
  }
}

import { PolishError, type RunResult, type RunSpec } from '@polish/protocol';
import { createInProcessDispatcher, startPolish } from '@polish/orchestrator';
import { handleTask, type RoleModels } from '@polish/agents';
import { readSpec, type SpecFlags } from '../read-spec.js';
import { resolveModels, type ModelFlags } from '../models.js';
import { createProgressReporter } from '../progress.js';
import { writeFileAtomic } from '../write-output.js';
import { exitCodeFor } from '../exit-codes.js';
import { InputError } from '../input-error.js';

/** Flags of `polish run`. */
export interface RunFlags extends SpecFlags, ModelFlags {
  out?: string;
  json?: boolean;
}

/** Runs a validated spec to its end, reporting progress on stderr; Ctrl-C cancels. */
export async function executeRun(spec: RunSpec, models: RoleModels): Promise<RunResult> {
  const controller = new AbortController();
  const cancel = (signal: NodeJS.Signals) => controller.abort(`interrupted by ${signal}`);
  process.once('SIGINT', cancel);
  process.once('SIGTERM', cancel);
  try {
    const dispatcher = createInProcessDispatcher((task) => handleTask(task, models));
    const run = startPolish(spec, { dispatcher, onEvent: createProgressReporter(), signal: controller.signal });
    return await run.result;
  } finally {
    process.off('SIGINT', cancel);
    process.off('SIGTERM', cancel);
  }
}

/** Prints the outcome: the artifact to --out or stdout, the result object with --json. Returns the exit code. */
export function emitResult(result: RunResult, flags: Pick<RunFlags, 'out' | 'json'>): number {
  const shipped = result.status === 'CONVERGED' || result.status === 'CAP_REACHED';
  if (shipped && flags.out) writeFileAtomic(flags.out, result.artifact);
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else if (shipped && !flags.out) process.stdout.write(result.artifact.endsWith('\n') ? result.artifact : `${result.artifact}\n`);
  if (result.status === 'CAP_REACHED') {
    process.stderr.write(`polish: cap reached; best version is iteration ${result.best_iteration}, remaining gaps:\n`);
    for (const gap of result.remaining_gaps) process.stderr.write(`  ${gap}\n`);
  }
  if (result.status === 'FAILED' || result.status === 'CANCELLED') {
    process.stderr.write(`polish: ${result.status}: ${result.reason}\n`);
  }
  return exitCodeFor(result.status);
}

/** `polish run <file|-> --goal …`: validates everything before anything runs or is written. */
export async function runCommand(artifactPath: string, flags: RunFlags): Promise<number> {
  const spec = readSpec(artifactPath, flags);
  const models = resolveModels(flags);
  try {
    return emitResult(await executeRun(spec, models), flags);
  } catch (error) {
    if (error instanceof PolishError && error.code === 'INVALID_INPUT') throw new InputError('spec', error.message);
    throw error;
  }
}

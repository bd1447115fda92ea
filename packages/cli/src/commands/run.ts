import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  invalidInput,
  PolishError,
  RunEventSchema,
  eventsSubject,
  type RunResult,
  type RunSpec,
} from '@polish/protocol';
import { createRunClient, laneDispatcher, startPolish, type RunClient, type TaskLane } from '@polish/orchestrator';
import type { ModelSettings } from '@polish/agents';
import type { ResolvedModels } from '../models.js';
import { planRun, type PlanFlags } from '../run-plan.js';
import { createProgressReporter } from '../progress.js';
import { checkWritable } from '../write-output.js';
import { writeFileAtomic } from '@polish/orchestrator';
import { exitCodeFor } from '../exit-codes.js';
import { openRuntime, type Runtime, type RuntimeOptions } from '../runtime.js';
import { parseSeconds, parseWholeNumber } from '../numbers.js';
import { abortOnInterrupt } from '../interrupts.js';
import { connectAs, readCredentials, type NatsAccessFlags } from '../nats-auth.js';
import { inspectModeOf, observeRun, type InspectFlags } from '../inspection.js';

/** Topology flags shared by `polish run` and `polish demo`. */
export interface TopologyFlags extends NatsAccessFlags {
  nats?: string;
  pool?: string;
  maxWorkers?: string;
  reuse?: string;
  stateDir?: string;
  taskTimeout?: string;
  workerWait?: string;
  queueWait?: string;
  taskLease?: string;
}

/** Flags of `polish run`. */
export interface RunFlags extends PlanFlags, TopologyFlags, InspectFlags {
  out?: string;
  json?: boolean;
  /** With --nats: orchestrate here even if a `polish serve` is there. */
  local?: boolean;
}

const log = (line: string) => process.stderr.write(`${line}\n`);

/** Validates the topology flags into runtime options (model settings added by the caller). */
export function readTopology(flags: TopologyFlags): RuntimeOptions {
  const natsUrl = flags.nats ?? process.env.NATS_URL;
  const pool = parseWholeNumber('pool', flags.pool, 1, 64);
  const maxWorkers = parseWholeNumber('max-workers', flags.maxWorkers, 1, 4096);
  const reuse = parseWholeNumber('reuse', flags.reuse, 1, 1_000_000);
  if (natsUrl && (pool !== undefined || maxWorkers !== undefined || reuse !== undefined || flags.stateDir)) {
    log(
      'polish: note: --pool, --max-workers, --reuse and --state-dir apply to embedded runs; with --nats the workers are started by `polish worker`',
    );
  }
  const taskTimeoutMs = parseSeconds('task-timeout', flags.taskTimeout);
  const credentials = readCredentials(flags);
  const workerWaitMs = parseSeconds('worker-wait', flags.workerWait);
  const queueWaitMs = parseSeconds('queue-wait', flags.queueWait);
  const leaseMs = parseSeconds('task-lease', flags.taskLease);
  return {
    ...(natsUrl ? { natsUrl } : {}),
    ...(pool === undefined ? {} : { pool }),
    ...(maxWorkers === undefined ? {} : { maxWorkers }),
    ...(reuse === undefined ? {} : { reuse }),
    ...(flags.stateDir ? { stateDir: flags.stateDir } : {}),
    ...(taskTimeoutMs === undefined ? {} : { taskTimeoutMs }),
    ...(workerWaitMs === undefined ? {} : { workerWaitMs }),
    ...(queueWaitMs === undefined ? {} : { queueWaitMs }),
    ...(leaseMs === undefined ? {} : { leaseMs }),
    ...(natsUrl && credentials ? { credentials } : {}),
    log,
  };
}

/**
 * Runs a validated spec over NATS to its end, reporting progress on stderr, and hands the result
 * to `emit` (which prints it and returns the exit code). Ctrl-C or SIGTERM cancels the run;
 * whatever was started (nats-server, workers) is stopped either way. Its events go to NATS;
 * with `--inspect` the local inspector shows it, and stays open after the run until Ctrl-C.
 */
export async function executeRun(
  spec: RunSpec,
  runtimeOptions: RuntimeOptions,
  prices: ResolvedModels['prices'] | undefined,
  inspectFlags: InspectFlags,
  emit: (result: RunResult) => number,
  judges: readonly ModelSettings[] = [],
  lanes: readonly TaskLane[] = [],
): Promise<number> {
  const mode = inspectModeOf(inspectFlags);
  const interrupt = abortOnInterrupt();
  try {
    const runtime = await openRuntime(runtimeOptions);
    // Judges 2..k each get their own embedded runtime: their own workers, with their own model.
    const judgeRuntimes: Runtime[] = [];
    try {
      for (const judge of judges.slice(1))
        judgeRuntimes.push(await openRuntime({ ...runtimeOptions, models: { evaluate: judge }, roles: ['evaluate'] }));
      if (!runtime.embedded) log(`polish: using workers on ${runtime.natsUrl}`);
      // Over NATS each judge's tasks go to its model's lane: only workers serving that model take them.
      const laned = runtime.embedded ? [] : lanes.map((lane) => laneDispatcher(runtime.dispatcher, lane));
      for (const [index, lane] of (runtime.embedded ? [] : lanes).entries())
        log(
          `polish: judge ${index + 1}: ${lane.model}, lane ${lane.name} (\`polish worker --lane\` hosts of that model)`,
        );
      checkFits(spec, runtime.maxPayload);
      const runId = randomUUID();
      const observed = await observeRun(runtime, runId, mode, inspectFlags, interrupt.signal);
      const progress = createProgressReporter();
      const result = await startPolish(spec, {
        runId,
        // A lone judge (one --evaluators spec) is the evaluate role's: its lane too.
        dispatcher: laned[0] ?? runtime.dispatcher,
        onEvent: (event) => {
          progress(event);
          observed.onEvent(event);
        },
        inspect: observed.inspect,
        signal: interrupt.signal,
        ...(prices ? { prices } : {}),
        ...(judgeRuntimes.length > 0
          ? { judges: [runtime.dispatcher, ...judgeRuntimes.map((judge) => judge.dispatcher)] }
          : {}),
        ...(laned.length > 0 ? { judges: laned } : {}),
      }).result;
      const code = emit(result);
      interrupt.dispose();
      await observed.finish();
      return code;
    } finally {
      for (const judge of judgeRuntimes) await judge.close({ abandon: interrupt.signal.aborted });
      await runtime.close({ abandon: interrupt.signal.aborted });
    }
  } finally {
    interrupt.dispose();
  }
}

/** A task carries the whole artifact: refuse one that cannot fit in a NATS message, before any model call. */
function checkFits(spec: RunSpec, maxPayload: number): void {
  // As it travels: JSON-escaped (quotes, newlines, control characters grow), with room for the
  // envelope, the goal, the criteria and the blocking gaps next to it.
  const encoded = Buffer.byteLength(JSON.stringify(spec.artifact));
  const needed = encoded + Buffer.byteLength(JSON.stringify(spec.goal)) + 64 * 1024;
  if (needed > maxPayload) {
    throw invalidInput(
      'artifact',
      `${encoded} bytes once encoded do not fit in a task: this NATS server accepts messages up to ${maxPayload} bytes ` +
        '(max_payload); raise max_payload in its configuration (the embedded server allows 8 MB)',
    );
  }
}

/** Prints the outcome: the artifact to --out or stdout, the result object with --json. Returns the exit code. */
export function emitResult(result: RunResult, flags: Pick<RunFlags, 'out' | 'json'>): number {
  const shipped =
    result.status === 'CONVERGED' || result.status === 'CAP_REACHED' || result.status === 'BUDGET_EXHAUSTED';
  // Paid work is never lost: when --out cannot be written (a full disk, say), the artifact goes
  // to standard output instead, the write error is reported, and the exit code stays the run's.
  let written = false;
  if (shipped && flags.out) {
    try {
      writeFileAtomic(flags.out, result.artifact);
      written = true;
    } catch (error) {
      const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      log(`polish: could not write --out ${flags.out} (${reason}); the artifact goes to standard output instead`);
    }
  }
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else if (shipped && !written)
    process.stdout.write(result.artifact.endsWith('\n') ? result.artifact : `${result.artifact}\n`);
  if (result.status === 'CAP_REACHED') {
    log(`polish: cap reached; best version is iteration ${result.best_iteration}, remaining gaps:`);
    for (const gap of result.remaining_gaps) log(`  ${gap}`);
  }
  if (result.status === 'BUDGET_EXHAUSTED') {
    const best = result.best_iteration ? `best version is iteration ${result.best_iteration}` : 'nothing was evaluated';
    log(`polish: budget exhausted (${result.reason}); ${best}, remaining gaps:`);
    for (const gap of result.remaining_gaps) log(`  ${gap}`);
  }
  if (result.status === 'FAILED' || result.status === 'CANCELLED') log(`polish: ${result.status}: ${result.reason}`);
  return exitCodeFor(result.status);
}

/**
 * Submits a validated spec to the `polish serve` on this NATS and follows its events until it
 * ends. Ctrl-C cancels the run there. The run survives this process: `polish status <runId>`.
 */
async function submitRun(
  spec: RunSpec,
  natsUrl: string,
  connection: NatsConnection,
  client: RunClient,
): Promise<RunResult> {
  const runId = randomUUID();
  log(`polish: submitting run ${runId} to the polish run service on ${natsUrl}`);
  const reporter = createProgressReporter();
  let markFinished: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (markFinished = resolve));
  const subscription = connection.subscribe(eventsSubject(runId), {
    callback: (_error, message) => {
      const event = RunEventSchema.safeParse(message.json());
      if (!event.success) return;
      reporter(event.data);
      if (event.data.type === 'run.finished') markFinished();
    },
  });
  const cancel = () => {
    log(`polish: cancelling run ${runId}`);
    void client.cancel(runId).catch(() => undefined);
  };
  process.on('SIGINT', cancel);
  process.on('SIGTERM', cancel);
  try {
    await connection.flush();
    await client.submit(spec, runId);
    await finished;
    const summary = await client.status(runId);
    if (!summary.result) throw new PolishError('INTERNAL', `run ${runId} finished without a result`);
    return summary.result;
  } finally {
    process.off('SIGINT', cancel);
    process.off('SIGTERM', cancel);
    subscription.unsubscribe();
  }
}

/** `polish run <file|-> --goal …`: validates everything before anything runs or is written. */
export async function runCommand(artifactPath: string, flags: RunFlags): Promise<number> {
  const topology = readTopology(flags);
  const plan = planRun(artifactPath, flags, topology.natsUrl !== undefined);
  const { spec } = plan;
  if (flags.out) checkWritable(flags.out);
  if (topology.natsUrl && !flags.local) {
    // A polish run service on that NATS takes the run (durable); else this process orchestrates it.
    const connection = await connectAs(topology.natsUrl, `polish-run-${process.pid}`, topology.credentials?.client);
    try {
      const client = createRunClient(connection);
      if (await client.available()) {
        if (plan.lanes)
          log(
            'polish: note: the run service sends every judge to its plain evaluate queue; to route each judge to ' +
              'its model’s lane, orchestrate here with --local',
          );
        if (inspectModeOf(flags))
          log(
            `polish: note: the run goes to the polish run service; watch it with \`polish inspect --nats ${topology.natsUrl}\``,
          );
        return emitResult(await submitRun(spec, topology.natsUrl, connection, client), flags);
      }
    } finally {
      await connection.drain();
    }
  }
  return executeRun(
    spec,
    { ...topology, ...(plan.models ? { models: plan.models } : {}) },
    plan.prices,
    flags,
    (result) => emitResult(result, flags),
    plan.judges,
    plan.lanes,
  );
}

import { unavailable, invalidInput } from '@polish/protocol';
import { createRunClient, type RunClient } from '@polish/orchestrator';
import type { QueueStats, RunSummary } from '@polish/protocol';
import { connectAs, readCredentials, type NatsAccessFlags } from '../nats-auth.js';
import { parseWholeNumber } from '../numbers.js';

/** Flags shared by status, list, cancel, resume and extend. */
export interface ControlFlags extends NatsAccessFlags {
  nats?: string;
  json?: boolean;
  cap?: string;
}

async function withClient<T>(flags: ControlFlags, use: (client: RunClient) => Promise<T>): Promise<T> {
  const natsUrl = flags.nats ?? process.env.NATS_URL;
  if (!natsUrl)
    throw invalidInput('nats', 'required: pass --nats nats://host:4222 (where `polish serve` runs) or set NATS_URL');
  const credentials = readCredentials(flags);
  const connection = await connectAs(natsUrl, `polish-client-${process.pid}`, credentials?.client);
  try {
    const client = createRunClient(connection);
    if (!(await client.available()))
      throw unavailable(
        `no polish run service answers on ${natsUrl}: start one with \`polish serve --nats ${natsUrl}\``,
      );
    return await use(client);
  } finally {
    await connection.drain();
  }
}

const queueLine = (queue: QueueStats) =>
  `${(queue.lane ? `${queue.role} lane ${queue.lane}` : queue.role).padEnd(12)} ${String(queue.queued).padStart(5)} queued` +
  `${queue.oldest_ms === null ? '' : ` (oldest ${Math.round(queue.oldest_ms / 1000)} s)`}, ` +
  `${queue.pulling} worker${queue.pulling === 1 ? '' : 's'} pulling, ${queue.in_flight} in flight`;

const line = (run: RunSummary) =>
  `${run.runId}  ${run.status.padEnd(11)} ${run.state.padEnd(10)} iteration ${run.iteration}/${run.cap}  owner ${run.owner}` +
  `${run.problem ? `\n  problem: ${run.problem}` : ''}`;

function print(flags: ControlFlags, value: RunSummary | RunSummary[]) {
  if (flags.json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  else for (const run of Array.isArray(value) ? value : [value]) process.stdout.write(`${line(run)}\n`);
}

/** `polish status [runId]`, `polish list`, `polish cancel|resume runId`, `polish extend runId --cap N`. */
export async function controlCommand(
  operation: 'status' | 'list' | 'cancel' | 'resume' | 'extend',
  runId: string | undefined,
  flags: ControlFlags,
): Promise<number> {
  if (operation !== 'list' && operation !== 'status' && !runId)
    throw invalidInput('runId', `required: polish ${operation} <runId>`);
  const cap = operation === 'extend' ? parseWholeNumber('cap', flags.cap, 2, 8) : undefined;
  if (operation === 'extend' && cap === undefined)
    throw invalidInput('cap', 'required: polish extend <runId> --cap N (up to 8)');
  return withClient(flags, async (client) => {
    if (operation === 'status' && !runId) {
      // The whole picture: every run, and each role's task queue.
      const [runs, queues] = await Promise.all([client.list(), client.queues()]);
      if (flags.json) process.stdout.write(`${JSON.stringify({ runs, queues }, null, 2)}\n`);
      else {
        print(flags, runs);
        process.stdout.write('task queues:\n');
        for (const queue of queues) process.stdout.write(`  ${queueLine(queue)}\n`);
      }
    } else if (operation === 'list') print(flags, await client.list());
    else if (operation === 'status') print(flags, await client.status(runId as string));
    else if (operation === 'cancel') print(flags, await client.cancel(runId as string));
    else if (operation === 'resume') print(flags, await client.resume(runId as string));
    else print(flags, await client.extend(runId as string, cap as number));
    return 0;
  });
}

// Run only while the worker snapshot is built (snapshot-entry.ts), against a NATS server that the
// build started for it (scripts/bundle-worker.js): a worker serves a few tasks through the whole
// path a real one takes (connect, find its queue, pull, say "taken", answer, store the reply,
// ack). A restored worker then starts with that code compiled: V8 keeps the bytecode of every
// function that ran in the snapshot, and compiling it is what a fresh process otherwise pays on
// its first task, inside the hop. Nothing of it is kept but code: the streams are deleted, the
// connection closed, the inbox prefix drawn anew after the restore.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, RetentionPolicy, StorageType, jetstreamManager } from '@nats-io/jetstream';
import { PROTOCOL_VERSION, taskQueueNames, taskQueueOf, wireNames } from '@polish/protocol';
import type { NatsClient } from './nats-client.js';
import { runWorker } from './run-worker.js';

/** The environment variable that gives the snapshot build its NATS server. */
export const SNAPSHOT_NATS_ENV = 'POLISH_SNAPSHOT_NATS';
/** ...and the password of its user `snapshot` (so no other local user can send the build a task). */
export const SNAPSHOT_NATS_PASS_ENV = 'POLISH_SNAPSHOT_NATS_PASS';
const SNAPSHOT_USER = 'snapshot';

const TASKS = 3;
const STOP_AFTER_MS = 30_000;
const PREFIX = 'snapshot';
const criteria = [{ id: 'C1', text: 'The artifact says how many requests a key may send.' }];

/** Serves TASKS evaluate tasks through a real NATS server with a worker of the snapshot's code. */
export async function exercisePath(natsUrl: string, pass: string, nats: NatsClient): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'polish-snapshot-'));
  const script = join(scratch, 'script.json');
  writeFileSync(
    script,
    JSON.stringify({ evaluate: [{ answer: { scores: [{ criterion_id: 'C1', pass: true, evidence: '100' }] } }] }),
  );
  let connection: Awaited<ReturnType<NatsClient['connect']>> | undefined;
  // A worker that gets fewer tasks than were sent stops after STOP_AFTER_MS instead of holding the
  // build for good, and the count below fails the build. A timer cleared, not
  // AbortSignal.timeout(): that one would still be pending when the snapshot is taken.
  const stop = new AbortController();
  const deadline = setTimeout(() => stop.abort(), STOP_AFTER_MS);
  try {
    connection = await nats.connect({ servers: natsUrl, user: SNAPSHOT_USER, pass });
    const manager = await jetstreamManager(connection);
    const names = taskQueueNames(PREFIX);
    const queue = taskQueueOf('evaluate', undefined, PREFIX);
    await manager.streams.add({
      name: names.tasksStream,
      subjects: [queue.subject],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.Memory,
    });
    await manager.streams.add({
      name: names.repliesStream,
      subjects: [wireNames(PREFIX).allReplies],
      storage: StorageType.Memory,
    });
    await manager.consumers.add(queue.stream, {
      durable_name: queue.consumer,
      ack_policy: AckPolicy.Explicit,
      filter_subject: queue.subject,
    });
    const js = nats.jetstream(connection);
    for (let index = 0; index < TASKS; index += 1) {
      const envelope = {
        v: PROTOCOL_VERSION,
        taskId: `snapshot-${index}`,
        role: 'evaluate',
        attempt: 1,
        deadline: 0,
        timeoutMs: 60_000,
        idempotencyKey: String(index).repeat(64),
        payload: { artifact: 'Each key may send 100 requests per minute.', criteria },
      };
      await js.publish(queue.subject, JSON.stringify(envelope));
    }
    await runWorker(
      {
        natsUrl,
        prefix: PREFIX,
        role: 'evaluate',
        reuse: TASKS,
        model: { provider: 'scripted', script },
        auth: { identity: { user: SNAPSHOT_USER, pass } },
      },
      { notify: async () => undefined, stop: stop.signal, pulling: () => undefined },
      { entryAt: 0, code: 0, loadNats: async () => nats },
    );
    const { state } = await manager.streams.info(names.repliesStream);
    if (state.messages !== TASKS) throw new Error(`the snapshot's worker answered ${state.messages} of ${TASKS} tasks`);
    await manager.streams.delete(names.tasksStream);
    await manager.streams.delete(names.repliesStream);
  } finally {
    clearTimeout(deadline);
    await connection?.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}

#!/usr/bin/env node
// Submits a run to a running `polish serve` and follows it to its end, using only a NATS client
// (`nats`, the legacy npm client): no polish package. See docs/protocol.md for the wire contract.
//
//   node submit-and-follow.mjs draft.md --goal "A README a new user can follow" --nats nats://127.0.0.1:4222
//
// Arguments and options:
//   FILE | -              the artifact (a file, or - for standard input)
//   --goal TEXT           what the artifact must achieve (required)
//   --criteria FILE       a JSON list of criteria [{"id":"C1","text":"…"}]: skips Wave 1
//   --threshold T         pass_all (default) or pass_N
//   --cap N               most evaluations, 1..8 (default 4)
//   --nats URL            NATS_URL (default nats://127.0.0.1:4222)
//   --credentials FILE    POLISH_NATS_CREDENTIALS: a `polish nats-config` file; connects as `client`
//   --prefix NAME         POLISH_SUBJECT_PREFIX (default polish)
//   --json                one JSON object per line: each event, then the run summary
//
// It prints every event of the run as it happens, then the outcome, and exits like `polish run`:
// 0 CONVERGED, 3 CAP_REACHED, 4 FAILED, 5 CANCELLED, 2 the service refused the spec, 6 no NATS or
// no run service, 1 anything else. Ctrl-C asks the service to cancel the run (it then ends CANCELLED).
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

/** `import(name)`, or, inside the polish checkout, the copy installed for its tests. */
async function load(name) {
  try {
    return await import(name);
  } catch (error) {
    if (error?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
    const require = createRequire(new URL('../../test/package.json', import.meta.url));
    return import(pathToFileURL(require.resolve(name)).href);
  }
}

const EXIT = { CONVERGED: 0, CAP_REACHED: 3, FAILED: 4, CANCELLED: 5 };
const fail = (code, line) => {
  process.stderr.write(`submit-and-follow: ${line}\n`);
  process.exit(code);
};

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    goal: { type: 'string' },
    criteria: { type: 'string' },
    threshold: { type: 'string' },
    cap: { type: 'string' },
    nats: { type: 'string' },
    credentials: { type: 'string' },
    prefix: { type: 'string' },
    json: { type: 'boolean' },
  },
});
if (positionals.length !== 1 || !flags.goal)
  fail(
    2,
    'usage: submit-and-follow.mjs FILE|- --goal TEXT [--criteria FILE] [--threshold T] [--cap N] [--nats URL] [--json]',
  );

// The spec: the service validates it again (run-spec.schema.json) and answers INVALID_INPUT naming the field.
const spec = {
  artifact: readFileSync(positionals[0] === '-' ? 0 : positionals[0], 'utf8'),
  goal: flags.goal,
  ...(flags.criteria ? { criteria: JSON.parse(readFileSync(flags.criteria, 'utf8')) } : {}),
  ...(flags.threshold ? { threshold: flags.threshold } : {}),
  ...(flags.cap ? { cap: Number(flags.cap) } : {}),
};

const { connect } = await load('nats');
const natsUrl = flags.nats ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = flags.prefix ?? process.env.POLISH_SUBJECT_PREFIX ?? 'polish';
const credentialsFile = flags.credentials ?? process.env.POLISH_NATS_CREDENTIALS;
let auth = {};
if (credentialsFile) {
  const { user, password, inboxPrefix } = JSON.parse(readFileSync(credentialsFile, 'utf8')).client;
  auth = { user, pass: password, inboxPrefix };
}
const connection = await connect({ servers: natsUrl, name: `raw-client-${process.pid}`, ...auth }).catch((error) =>
  fail(6, `cannot connect to NATS at ${natsUrl}: ${error.message}`),
);

/** One request to the run service; its reply is a run-service.reply object. */
async function call(operation, body) {
  const message = await connection.request(`${prefix}.v1.run.${operation}`, JSON.stringify(body), { timeout: 30_000 });
  return message.json();
}

// The run service is a NATS micro service named "polish": discoverable with $SRV.PING/INFO/STATS.
try {
  await connection.request('$SRV.PING.polish', '', { timeout: 2_000 });
} catch {
  fail(6, `no polish run service answers on ${natsUrl} (start one: polish serve --nats ${natsUrl})`);
}

// Subscribe to the run's events before submitting, so not one is missed. The run id is ours to choose.
const runId = randomUUID();
const events = connection.subscribe(`${prefix}.v1.events.${runId}`);
await connection.flush();

const submitted = await call('submit', { spec, runId });
if (!submitted.ok)
  fail(
    submitted.code === 'INVALID_INPUT' ? 2 : 1,
    `the run service refused the run: ${submitted.code}: ${submitted.message}`,
  );
process.stderr.write(`submit-and-follow: submitted run ${runId} (owner ${submitted.run.owner})\n`);

let cancelling = false;
process.on('SIGINT', () => {
  if (cancelling) return;
  cancelling = true;
  process.stderr.write(`submit-and-follow: cancelling run ${runId}\n`);
  call('cancel', { runId }).catch(() => undefined);
});

const usage = (u) => `${u.model_calls} calls, ${u.input_tokens} in / ${u.output_tokens} out tokens`;

/** One readable line per event (every field is in --json). */
function describe(event) {
  switch (event.type) {
    case 'run.started':
      return `cap ${event.cap}, threshold ${event.threshold}`;
    case 'state.entered':
      return event.state;
    case 'wave.started':
      return `${event.role}, iteration ${event.iteration}, ${event.payload_bytes ?? '?'} bytes sent`;
    case 'wave.finished':
      return (
        `${event.role}, iteration ${event.iteration}: answered by ${event.model.provider}:${event.model.model}` +
        `${event.model.scripted ? ' (scripted)' : ''} in process ${event.worker.pid} on ${event.worker.hostname}, ` +
        `${event.attempts} dispatch(es), ${Math.round(event.duration_ms)} ms, ${usage(event.usage)}`
      );
    case 'criteria.locked':
      return `${event.extracted ? 'extracted' : 'given'}: ${event.criteria.map((criterion) => `${criterion.id} ${criterion.text}`).join(' | ')}`;
    case 'iteration.evaluated':
      return `iteration ${event.iteration}: ${event.passed}/${event.total} pass${event.blocking_gaps.length ? `; gaps: ${event.blocking_gaps.join(' | ')}` : ''}`;
    case 'iteration.finished':
      return `iteration ${event.iteration}: ${usage(event.usage)}`;
    case 'run.finished':
      return `${event.status} after ${event.iterations} iteration(s), ${usage(event.usage)}`;
    default:
      return JSON.stringify(event);
  }
}

for await (const message of events) {
  const event = message.json();
  process.stdout.write(flags.json ? `${JSON.stringify(event)}\n` : `${event.type}: ${describe(event)}\n`);
  if (event.type === 'run.finished') break;
}

// The result is stored with the run: ask the service for it.
const status = await call('status', { runId });
if (!status.ok) fail(1, `cannot read run ${runId}: ${status.code}: ${status.message}`);
const run = await resolveObjects(status.run);
const { result } = run;
if (flags.json) {
  process.stdout.write(`${JSON.stringify(run)}\n`);
} else {
  process.stdout.write(`status: ${result.status} after ${result.iterations} iteration(s)\n`);
  if (result.status === 'CAP_REACHED')
    process.stdout.write(
      `remaining gaps (best version: iteration ${result.best_iteration}):\n${result.remaining_gaps.map((gap) => `  ${gap}\n`).join('')}`,
    );
  if (result.status === 'FAILED' || result.status === 'CANCELLED')
    process.stdout.write(`reason: ${result.code ? `${result.code}: ` : ''}${result.reason}\n`);
  if (result.status === 'CONVERGED' || result.status === 'CAP_REACHED')
    process.stdout.write(`--- artifact ---\n${result.artifact}\n`);
}
await connection.drain();
process.exit(EXIT[result.status] ?? 1);

/**
 * Strings over 64 KiB travel as {"$polish_object": "<sha256>"}: the text is in the Object Store
 * `<prefix>_artifacts` under that name. Reading it needs JetStream access (the nats-config
 * `client` user has none: there, keep artifacts under 64 KiB or give the client read access).
 */
async function resolveObjects(value) {
  if (Array.isArray(value)) return Promise.all(value.map(resolveObjects));
  if (!value || typeof value !== 'object') return value;
  if (typeof value.$polish_object === 'string') {
    const store = await connection.jetstream().views.os(`${prefix}_artifacts`);
    return new TextDecoder().decode(await store.getBlob(value.$polish_object));
  }
  return Object.fromEntries(
    await Promise.all(Object.entries(value).map(async ([key, inner]) => [key, await resolveObjects(inner)])),
  );
}

#!/usr/bin/env node
// A polish evaluate worker written without any polish package: only a NATS client (`nats`, the
// legacy npm client), the published JSON Schema files (packages/protocol/schema/) and ajv.
// See docs/protocol.md for the wire contract it implements.
//
// Its "model" is a keyword rule, and it says so (`scripted: true`): criterion Cn passes when the
// artifact contains Cn's keyword (`--keyword Cn=WORD`), else the default keyword (`--keyword WORD`);
// a criterion with neither passes (there is nothing to look for).
//
//   node evaluate-worker.mjs --nats nats://127.0.0.1:4222 --keyword "per minute" --keyword C2=429
//
// Options (each also from the environment):
//   --nats URL            NATS_URL (default nats://127.0.0.1:4222)
//   --keyword [Cn=]WORD   EVALUATE_KEYWORDS, comma-separated (repeatable flag)
//   --malformed           EVALUATE_MALFORMED=1: leave the last criterion out of every verdict, so
//                         the orchestrator's contract check rejects it (to see a run end FAILED)
//   --credentials FILE    POLISH_NATS_CREDENTIALS: a `polish nats-config` credentials file; the
//                         worker connects as the `evaluate` user with its own inbox prefix
//   --prefix NAME         POLISH_SUBJECT_PREFIX (default polish): subjects are NAME.v1.…
//   --schemas DIR         POLISH_SCHEMA_DIR (default ../../packages/protocol/schema from here)
//
// It pulls tasks from the evaluate queue until SIGTERM or Ctrl-C, answers the one in hand, and exits 0.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
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

const { connect } = await load('nats');
const { default: Ajv2020 } = await load('ajv/dist/2020.js');

const { values: flags } = parseArgs({
  options: {
    nats: { type: 'string' },
    keyword: { type: 'string', multiple: true },
    malformed: { type: 'boolean' },
    credentials: { type: 'string' },
    prefix: { type: 'string' },
    schemas: { type: 'string' },
  },
});
const natsUrl = flags.nats ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = flags.prefix ?? process.env.POLISH_SUBJECT_PREFIX ?? 'polish';
const malformed = flags.malformed ?? process.env.EVALUATE_MALFORMED === '1';
const schemaDir =
  flags.schemas ??
  process.env.POLISH_SCHEMA_DIR ??
  fileURLToPath(new URL('../../packages/protocol/schema/', import.meta.url));
const credentialsFile = flags.credentials ?? process.env.POLISH_NATS_CREDENTIALS;

const log = (line) => process.stderr.write(`evaluate-worker: ${line}\n`);

// --- the rule ---------------------------------------------------------------------------------
const keywordSpecs = flags.keyword ?? (process.env.EVALUATE_KEYWORDS ?? '').split(',').filter((word) => word.trim());
const keywords = new Map();
let defaultKeyword;
for (const spec of keywordSpecs) {
  const match = /^(C[1-9][0-9]*)=(.+)$/.exec(spec);
  if (match) keywords.set(match[1], match[2]);
  else defaultKeyword = spec;
}

/** The verdict: one score per criterion, a gap on each failing one. */
function judge({ artifact, criteria }) {
  const scores = criteria.map((criterion) => {
    const word = keywords.get(criterion.id) ?? defaultKeyword;
    // A pass quotes the words of the artifact that satisfy it: the keyword, or (no keyword) the first line.
    if (word === undefined || artifact.includes(word))
      return { criterion_id: criterion.id, pass: true, evidence: word ?? artifact.trim().split('\n')[0] };
    return {
      criterion_id: criterion.id,
      pass: false,
      gap: `The artifact does not contain "${word}"; add it where it answers "${criterion.text}"`,
    };
  });
  // Malformed on purpose: a criterion left unscored breaks the evaluation contract.
  return { scores: malformed ? scores.slice(0, -1) : scores };
}

// --- the published JSON Schemas ---------------------------------------------------------------
const ajv = new Ajv2020({ allErrors: true });
const read = (name) => JSON.parse(readFileSync(join(schemaDir, `${name}.schema.json`), 'utf8'));
const envelopeSchema = read('task-envelope');
const validEnvelope = ajv.compile(envelopeSchema);
const validPayload = ajv.compile(read('payload.evaluate'));
const validEvaluation = ajv.compile(read('evaluation'));
const validReply = ajv.compile(read('task-reply'));
// The envelope schema is a oneOf with one branch per role: only the evaluate branch's errors matter here.
const evaluateBranch = `#/oneOf/${envelopeSchema.oneOf.findIndex((branch) => branch.properties.role.const === 'evaluate')}/`;

/** ajv's errors as one line, each naming where in the task it is. */
const explain = (errors, base = '') =>
  (errors ?? [])
    .map(
      (error) =>
        `${base + error.instancePath || '(root)'} ${error.message}${error.params?.additionalProperty ? ` (${error.params.additionalProperty})` : ''}`,
    )
    .join('; ');

/** Why a task is not a valid evaluate task, or undefined when it is. */
function problemWith(task) {
  if (!task || typeof task !== 'object' || Array.isArray(task)) return 'the task is not a JSON object';
  if (task.role !== 'evaluate') return `/role this worker serves "evaluate", not ${JSON.stringify(task.role)}`;
  // The payload first: its schema names the very field that is wrong.
  if (!validPayload(task.payload)) return explain(validPayload.errors, '/payload');
  if (!validEnvelope(task)) {
    const own = (validEnvelope.errors ?? []).filter((error) => error.schemaPath.startsWith(evaluateBranch));
    return explain(own.length ? own : validEnvelope.errors);
  }
  // What JSON Schema cannot say: criterion ids are unique.
  const ids = task.payload.criteria.map((criterion) => criterion.id);
  if (new Set(ids).size !== ids.length) return '/payload/criteria criterion ids must be unique';
  return undefined;
}

// --- the wire ---------------------------------------------------------------------------------
const worker = { pid: process.pid, hostname: hostname() };
const model = { provider: 'raw-client', model: 'keyword-rule', scripted: true };
const NO_USAGE = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, model_calls: 0 };
const ONE_CALL = { ...NO_USAGE, model_calls: 1 };

const failure = (taskId, code, message, retryable = false) => ({
  v: 1,
  taskId,
  ok: false,
  error: { code, message, retryable },
  usage: NO_USAGE,
  worker,
});

/** The reply to one task message: a verdict, or a coded error. Never throws. */
function answer(data) {
  let task;
  try {
    task = JSON.parse(new TextDecoder().decode(data));
  } catch {
    return failure('unknown', 'INVALID_INPUT', 'task rejected before any model call: the message is not JSON');
  }
  const taskId = typeof task?.taskId === 'string' && task.taskId ? task.taskId : 'unknown';
  const problem = problemWith(task);
  if (problem) return failure(taskId, 'INVALID_INPUT', `task rejected before any model call: ${problem}`);
  const result = judge(task.payload);
  if (!validEvaluation(result))
    return failure(
      taskId,
      'INTERNAL',
      `evaluate worker failed: its verdict is not an evaluation: ${explain(validEvaluation.errors)}`,
    );
  const summary = result.scores.map((score) => `${score.criterion_id} ${score.pass ? 'pass' : 'fail'}`).join(', ');
  log(`task ${taskId} attempt ${task.attempt}: ${summary}${malformed ? ' (malformed on purpose)' : ''}`);
  return { v: 1, taskId, ok: true, result, usage: ONE_CALL, model, worker };
}

let auth = {};
if (credentialsFile) {
  const { user, password, inboxPrefix } = JSON.parse(readFileSync(credentialsFile, 'utf8')).evaluate;
  auth = { user, pass: password, inboxPrefix };
}
const connection = await connect({ servers: natsUrl, name: `raw-evaluate-${process.pid}`, ...auth });
const js = connection.jetstream();
// The task queue: stream <PREFIX>_TASKS, one durable pull consumer per role; the evaluate one is "evaluate".
const stream = `${prefix.toUpperCase()}_TASKS`;
const consumerName = 'evaluate';
let stopping = false;
const stop = (signal) => {
  log(`${signal}: stopping (no new tasks; the task in hand is answered)`);
  stopping = true;
};
process.once('SIGTERM', () => stop('SIGTERM'));
process.once('SIGINT', () => stop('SIGINT'));

// The consumer is made by the orchestrator (polish serve, polish run): wait for it if we came first.
let consumer;
for (let told = false; !consumer && !stopping; told = true) {
  consumer = await js.consumers.get(stream, consumerName).catch((error) => {
    if (!/not found/i.test(String(error?.message))) throw error;
    if (!told) log(`waiting for the consumer ${consumerName} of ${stream} (start polish serve or a run)`);
    return new Promise((resolve) => setTimeout(() => resolve(undefined), 500));
  });
}
log(
  `ready: pid ${process.pid}, pulling from ${stream}/${consumerName}, model ${model.provider}:${model.model} (scripted)${malformed ? ', MALFORMED verdicts' : ''}`,
);

// One task at a time: pull one (it is ours until we ack it, or our lease runs out), answer it on
// <prefix>.v1.reply.evaluate.<idempotencyKey>, then ack. A pull expires after 2 s when the queue
// is empty, so a stop is seen promptly; a task that arrives after the stop is given back (nak).
while (!stopping && consumer) {
  const message = await consumer.next({ expires: 2_000 });
  if (!message) continue;
  if (stopping) {
    message.nak();
    break;
  }
  let task;
  try {
    task = JSON.parse(new TextDecoder().decode(message.data));
  } catch {
    task = undefined;
  }
  const key =
    typeof task?.idempotencyKey === 'string' && /^[a-f0-9]{64}$/.test(task.idempotencyKey)
      ? task.idempotencyKey
      : undefined;
  if (!key) {
    // Nowhere to answer: the task leaves the queue for good.
    log('a task without an idempotency key: terminated (nowhere to reply)');
    message.term();
    continue;
  }
  const progress = (state) =>
    connection.publish(
      `${prefix}.v1.progress.evaluate.${key}`,
      JSON.stringify({
        v: 1,
        taskId: typeof task.taskId === 'string' && task.taskId ? task.taskId : 'unknown',
        state,
        delivery: message.info.deliveryCount,
        queue_seq: message.info.streamSequence,
        delivery_seq: message.info.deliverySequence,
        worker,
      }),
    );
  progress('taken');
  let reply = answer(message.data);
  if (!validReply(reply))
    reply = failure(
      reply.taskId ?? 'unknown',
      'INTERNAL',
      `evaluate worker failed: its reply is invalid: ${explain(validReply.errors)}`,
    );
  if (!reply.ok) log(`rejected task ${reply.taskId}: ${reply.error.code}: ${reply.error.message}`);
  // The reply is stored (the replies stream keeps it) before the task leaves the queue.
  await js.publish(`${prefix}.v1.reply.evaluate.${key}`, JSON.stringify(reply));
  message.ack();
}
await connection.drain();
log('stopped, exiting');

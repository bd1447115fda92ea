import type { TaskRole } from './roles.js';
import { PROTOCOL_VERSION } from './version.js';

// Every name polish uses on NATS is built here and nowhere else: subjects, wildcards, streams,
// buckets, consumers and the service name. Other packages (and a worker in another language,
// through docs/protocol.md) take them from these functions.

/** Subject prefix when none is configured; several deployments can share a NATS by choosing others. */
export const DEFAULT_SUBJECT_PREFIX = 'polish';

/** The NATS micro service name of the run service: `$SRV.PING.polish`, `$SRV.INFO.polish`, `$SRV.STATS.polish`. */
export const RUN_SERVICE_NAME = 'polish';

/** The operations of the run service, each served on `polish.v1.run.<operation>`. */
export const RUN_OPERATIONS = ['submit', 'status', 'list', 'cancel', 'extend', 'resume', 'queues'] as const;
export type RunOperation = (typeof RUN_OPERATIONS)[number];

const rootOf = (prefix: string) => `${prefix}.v${PROTOCOL_VERSION}`;

/** `polish.v1.task.<role>`: work for a role, kept in the task queue until a worker takes it. */
export function taskSubject(role: TaskRole, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${rootOf(prefix)}.task.${role}`;
}

/** `polish.v1.reply.<role>.<key>`: a worker's answer to the task whose idempotency key is `key` (kept in the replies stream). */
export function replySubject(role: TaskRole, key: string, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${rootOf(prefix)}.reply.${role}.${key}`;
}

/** `polish.v1.progress.<role>.<key>`: a worker took the task, or gave it back (not stored). */
export function progressSubject(role: TaskRole, key: string, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${rootOf(prefix)}.progress.${role}.${key}`;
}

/** `polish.v1.crashed.<role>`: an agent host says a worker died holding a task of this role. */
export function crashSubject(role: TaskRole, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${rootOf(prefix)}.crashed.${role}`;
}

/**
 * The task queue (DESIGN §4): one JetStream work-queue stream holds every role's tasks, with one
 * durable pull consumer per role; a second stream keeps the replies, so an orchestrator that
 * was down finds the answers of tasks finished meanwhile.
 */
export function taskQueueNames(prefix = DEFAULT_SUBJECT_PREFIX) {
  const upper = prefix.toUpperCase();
  return {
    tasksStream: `${upper}_TASKS`,
    repliesStream: `${upper}_REPLIES`,
    /** The durable pull consumer of a role: the role with `.` written `_` (`par.plan` → `par_plan`). */
    taskConsumer: (role: TaskRole) => role.replace(/\./g, '_'),
  };
}

/**
 * Roles whose tasks can also wait in a model's lane: a quorum's judges. Judge i's task goes to
 * the lane of its model, which only workers serving that model take, so judges from different
 * model families stay on their own models when the workers run elsewhere.
 */
export const LANE_ROLES = ['evaluate'] as const satisfies readonly TaskRole[];
export type LaneRole = (typeof LANE_ROLES)[number];
export const isLaneRole = (role: TaskRole): role is LaneRole => (LANE_ROLES as readonly string[]).includes(role);

/** A lane's name: one subject token that is also a valid consumer name. */
export const LANE_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * The lane of a model (`provider:model`, e.g. `openai:gpt-5.1` → `openai_gpt-5_1`): every run of
 * characters that cannot be in a subject token or a consumer name is written `_`.
 */
export function modelLane(model: string): string {
  const lane = model.trim().replace(/[^A-Za-z0-9_-]+/g, '_');
  if (!LANE_PATTERN.test(lane)) throw new Error(`"${model}" gives no usable lane name (${lane || 'empty'})`);
  return lane;
}

/**
 * The lanes of a role: a work-queue stream of their own (`POLISH_LANES_EVALUATE`, subjects
 * `polish.v1.lane.evaluate.>`), one durable pull consumer per lane, named as the lane. A stream
 * of its own so that a role's workers can be allowed every lane of their role (and no other
 * queue) by one permission, without knowing the lanes when the server is configured.
 */
export function laneQueueNames(role: LaneRole, prefix = DEFAULT_SUBJECT_PREFIX) {
  return {
    stream: `${prefix.toUpperCase()}_LANES_${role.toUpperCase().replace(/\./g, '_')}`,
    subjects: `${rootOf(prefix)}.lane.${role}.>`,
    subject: (lane: string) => `${rootOf(prefix)}.lane.${role}.${lane}`,
    consumer: (lane: string) => lane,
  };
}

/** Where a task waits: its role's queue, or one of the role's model lanes. */
export interface TaskQueueAddress {
  stream: string;
  consumer: string;
  subject: string;
  /** For messages: `evaluate`, or `evaluate lane openai_gpt-5`. */
  label: string;
}

/** The stream, consumer and subject of a role's queue, or of one of its lanes (roles in {@link LANE_ROLES}). */
export function taskQueueOf(role: TaskRole, lane?: string, prefix = DEFAULT_SUBJECT_PREFIX): TaskQueueAddress {
  if (lane === undefined) {
    const names = taskQueueNames(prefix);
    return {
      stream: names.tasksStream,
      consumer: names.taskConsumer(role),
      subject: taskSubject(role, prefix),
      label: role,
    };
  }
  if (!isLaneRole(role)) throw new Error(`${role} tasks have no lanes (only ${LANE_ROLES.join(', ')})`);
  if (!LANE_PATTERN.test(lane)) throw new Error(`"${lane}" is not a lane name (${LANE_PATTERN})`);
  const names = laneQueueNames(role, prefix);
  return {
    stream: names.stream,
    consumer: names.consumer(lane),
    subject: names.subject(lane),
    label: `${role} lane ${lane}`,
  };
}

/** JetStream's advisory when a task of the queue was delivered as often as its consumer allows. */
export function maxDeliveriesAdvisory(stream: string): string {
  return `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${stream}.*`;
}

/** `polish.v1.events.<runId>`: a run's transitions and wave starts/ends (`*` for every run). */
export function eventsSubject(runId: string, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${rootOf(prefix)}.events.${runId}`;
}

/** `polish.v1.inspect.<runId>`: a run's inspection events in the @statelyai/inspect format. */
export function inspectSubject(runId: string, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${rootOf(prefix)}.inspect.${runId}`;
}

/** `polish.v1.run.<operation>`: the run service. */
export function runServiceSubject(operation: RunOperation, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${rootOf(prefix)}.run.${operation}`;
}

/** `$SRV.<verb>.polish`: discovery of the run service. */
export function serviceDiscoverySubject(verb: 'PING' | 'INFO' | 'STATS' = 'PING'): string {
  return `$SRV.${verb}.${RUN_SERVICE_NAME}`;
}

/**
 * Names of the JetStream resources of a deployment: the runs KV bucket, the artifacts Object
 * Store, the event stream, and the streams JetStream keeps the bucket and the store in.
 */
export function storeNames(prefix = DEFAULT_SUBJECT_PREFIX) {
  const runs = `${prefix}_runs`;
  const artifacts = `${prefix}_artifacts`;
  return {
    runs,
    artifacts,
    events: `${prefix.toUpperCase()}_EVENTS`,
    /** The stream behind the KV bucket (JetStream's naming). */
    runsStream: `KV_${runs}`,
    /** The stream behind the Object Store (JetStream's naming). */
    artifactsStream: `OBJ_${artifacts}`,
  };
}

/**
 * Every wildcard and subject family a deployment uses, for stream configurations and per-role
 * permissions (see permissions.ts).
 */
export function wireNames(prefix = DEFAULT_SUBJECT_PREFIX) {
  const root = rootOf(prefix);
  const stores = storeNames(prefix);
  return {
    ...stores,
    allTasks: `${root}.task.>`,
    /** Every role's lanes (see {@link laneQueueNames}). */
    allLaneTasks: `${root}.lane.>`,
    laneStreams: LANE_ROLES.map((role) => laneQueueNames(role, prefix).stream),
    allReplies: `${root}.reply.>`,
    allProgress: `${root}.progress.>`,
    allCrashes: `${root}.crashed.>`,
    ...taskQueueNames(prefix),
    allEvents: `${root}.events.>`,
    allInspect: `${root}.inspect.>`,
    allRunService: `${root}.run.>`,
    allServiceDiscovery: '$SRV.>',
    runsBucketSubjects: `$KV.${stores.runs}.>`,
    artifactSubjects: `$O.${stores.artifacts}.>`,
    /** The subjects of the stream behind the artifacts store (chunks and metadata), as JetStream makes it. */
    artifactStreamSubjects: [`$O.${stores.artifacts}.C.>`, `$O.${stores.artifacts}.M.>`],
  };
}

/** The JetStream API subjects a principal may be allowed (see permissions.ts). */
export const jetStreamApi = {
  all: '$JS.API.>',
  info: '$JS.API.INFO',
  streamInfo: (stream: string) => `$JS.API.STREAM.INFO.${stream}`,
  streamCreate: (stream: string) => `$JS.API.STREAM.CREATE.${stream}`,
  consumerCreate: (stream: string) => [`$JS.API.CONSUMER.CREATE.${stream}`, `$JS.API.CONSUMER.CREATE.${stream}.>`],
  consumerInfo: (stream: string, consumer = '>') => `$JS.API.CONSUMER.INFO.${stream}.${consumer}`,
  consumerList: (stream: string) => `$JS.API.CONSUMER.LIST.${stream}`,
  consumerDelete: (stream: string) => `$JS.API.CONSUMER.DELETE.${stream}.>`,
  consumerNext: (stream: string, consumer = '>') => `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`,
  messageGet: (stream: string) => `$JS.API.STREAM.MSG.GET.${stream}`,
  ack: (stream = '>', consumer = '') =>
    stream === '>' ? '$JS.ACK.>' : consumer ? `$JS.ACK.${stream}.${consumer}.>` : `$JS.ACK.${stream}.>`,
  flowControl: '$JS.FC.>',
  /** What every ack subject of a delivery by this consumer starts with. */
  ackPrefix: (stream: string, consumer: string) => `$JS.ACK.${stream}.${consumer}.`,
} as const;

/** A NATS address as users give it: one URL, or a comma-separated list of a cluster's servers. */
export function natsServers(url: string): string[] {
  return url
    .split(',')
    .map((server) => server.trim())
    .filter(Boolean);
}

import { TaskRoleSchema } from './roles.js';
import {
  DEFAULT_SUBJECT_PREFIX,
  isLaneRole,
  jetStreamApi,
  laneQueueNames,
  maxDeliveriesAdvisory,
  progressSubject,
  replySubject,
  wireNames,
} from './subjects.js';
import type { TaskRole } from './roles.js';

// Role isolation on the wire (DESIGN §5): every process connects as its own NATS user, and each
// user may publish and subscribe only where its job needs. Allow-lists only: whatever a user is
// not allowed is denied, including JetStream's API (streams, consumers, KV, Object Store). This
// table is part of the protocol: a worker written in another language needs the same rights.

/** Who connects: the orchestrator, the inspector, a submitting client, an agent host, and each task role's workers. */
export const PRINCIPALS = ['orchestrator', 'inspector', 'client', 'host', ...TaskRoleSchema.options] as const;
export type Principal = (typeof PRINCIPALS)[number];

/** Each principal's own inbox prefix: replies to it land where no other user may subscribe. */
export const inboxPrefixOf = (principal: Principal) => `_INBOX_${principal.replace(/\./g, '_')}`;

/** What a principal may do on NATS, as allow-lists. */
export interface Permissions {
  publish: string[];
  subscribe: string[];
  /** May answer requests it received (the reply subject), once each. */
  allowResponses: boolean;
}

const isTaskRole = (principal: Principal): principal is TaskRole =>
  (TaskRoleSchema.options as readonly string[]).includes(principal);

/** What each principal may do, as allow-lists. */
export function permissionsFor(principal: Principal, prefix = DEFAULT_SUBJECT_PREFIX): Permissions {
  const inbox = `${inboxPrefixOf(principal)}.>`;
  const names = wireNames(prefix);
  if (isTaskRole(principal)) {
    // A worker pulls its role's tasks from its role's consumer, acks them, says it took one and
    // publishes the answer; its own inbox serves its pulls, its publish acks and its warm-up.
    // It cannot read another role's tasks, the stream's history, the runs or the events.
    // A role with lanes (a quorum's judges, one lane per model) may also pull from any consumer
    // of its own lanes' stream: every task there is its role's, whatever the lane.
    const consumer = names.taskConsumer(principal);
    const lanes = isLaneRole(principal) ? laneQueueNames(principal, prefix).stream : undefined;
    return {
      publish: [
        inbox,
        jetStreamApi.consumerInfo(names.tasksStream, consumer),
        jetStreamApi.consumerNext(names.tasksStream, consumer),
        jetStreamApi.ack(names.tasksStream, consumer),
        ...(lanes
          ? [jetStreamApi.consumerInfo(lanes, '*'), jetStreamApi.consumerNext(lanes, '*'), jetStreamApi.ack(lanes)]
          : []),
        `${replySubject(principal, '>', prefix)}`,
        `${progressSubject(principal, '>', prefix)}`,
      ],
      subscribe: [inbox],
      allowResponses: false,
    };
  }
  switch (principal) {
    case 'host':
      // Reads how many tasks wait per role (to boot what is needed) and says when a worker died
      // holding a task. It never answers a task, never takes one.
      return {
        publish: [
          inbox,
          jetStreamApi.consumerInfo(names.tasksStream),
          ...names.laneStreams.map((stream) => jetStreamApi.consumerInfo(stream)),
          names.allCrashes,
        ],
        subscribe: [inbox],
        allowResponses: false,
      };
    case 'inspector':
      // Reads the event stream through its own consumers; it never makes or changes a stream.
      return {
        publish: [
          inbox,
          jetStreamApi.info,
          jetStreamApi.streamInfo(names.events),
          ...jetStreamApi.consumerCreate(names.events),
          jetStreamApi.consumerInfo(names.events),
          jetStreamApi.consumerDelete(names.events),
          jetStreamApi.consumerNext(names.events),
          jetStreamApi.ack(names.events),
          jetStreamApi.flowControl,
          // The task queue's figures: waiting tasks, workers pulling, tasks in hand, the oldest's age.
          jetStreamApi.consumerInfo(names.tasksStream),
          jetStreamApi.messageGet(names.tasksStream),
          // And each model lane's (a lane is a consumer of its role's lanes stream).
          ...names.laneStreams.flatMap((stream) => [
            jetStreamApi.consumerList(stream),
            jetStreamApi.consumerInfo(stream),
            jetStreamApi.messageGet(stream),
          ]),
        ],
        subscribe: [inbox],
        allowResponses: false,
      };
    case 'client':
      // Submits and controls runs through the run service, and follows their events.
      return {
        publish: [inbox, names.allRunService, names.allServiceDiscovery],
        subscribe: [inbox, names.allEvents],
        allowResponses: false,
      };
    case 'orchestrator':
      return {
        publish: [
          inbox,
          names.allTasks,
          names.allLaneTasks,
          names.allEvents,
          names.allInspect,
          jetStreamApi.all,
          jetStreamApi.ack(),
          jetStreamApi.flowControl,
          names.runsBucketSubjects,
          names.artifactSubjects,
        ],
        subscribe: [
          inbox,
          names.allRunService,
          names.allServiceDiscovery,
          names.allReplies,
          names.allProgress,
          names.allCrashes,
          maxDeliveriesAdvisory(names.tasksStream),
          ...names.laneStreams.map(maxDeliveriesAdvisory),
        ],
        allowResponses: true,
      };
  }
}

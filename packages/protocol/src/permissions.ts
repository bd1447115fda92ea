import { TaskRoleSchema } from './roles.js';
import { DEFAULT_SUBJECT_PREFIX, jetStreamApi, taskSubject, wireNames } from './subjects.js';
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
    // A worker takes its role's tasks and answers them; its own inbox serves its warm-up. Nothing else.
    return { publish: [inbox], subscribe: [taskSubject(principal, prefix), inbox], allowResponses: true };
  }
  switch (principal) {
    case 'host':
      // Answers WORKER_CRASHED for a worker that died holding a task: to the orchestrators' inboxes only.
      return { publish: [`${inboxPrefixOf('orchestrator')}.>`], subscribe: [inbox], allowResponses: false };
    case 'inspector':
      // Reads the event stream through its own consumers; creates the stream if it is missing.
      return {
        publish: [
          inbox,
          jetStreamApi.info,
          jetStreamApi.streamInfo(names.events),
          jetStreamApi.streamCreate(names.events),
          ...jetStreamApi.consumerCreate(names.events),
          jetStreamApi.consumerInfo(names.events),
          jetStreamApi.consumerDelete(names.events),
          jetStreamApi.consumerNext(names.events),
          jetStreamApi.ack(names.events),
          jetStreamApi.flowControl,
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
          names.allEvents,
          names.allInspect,
          jetStreamApi.all,
          jetStreamApi.ack(),
          jetStreamApi.flowControl,
          names.runsBucketSubjects,
          names.artifactSubjects,
        ],
        subscribe: [inbox, names.allRunService, names.allServiceDiscovery],
        allowResponses: true,
      };
  }
}

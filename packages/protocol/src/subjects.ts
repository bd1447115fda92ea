import type { TaskRole } from './roles.js';
import { PROTOCOL_VERSION } from './version.js';

/** Subject prefix when none is configured; several deployments can share a NATS by choosing others. */
export const DEFAULT_SUBJECT_PREFIX = 'polish';

/** `polish.v1.task.<role>`: work for a role, served by the queue group named after the role. */
export function taskSubject(role: TaskRole, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${prefix}.v${PROTOCOL_VERSION}.task.${role}`;
}

/** `polish.v1.events.<runId>`: a run's transitions and wave starts/ends. */
export function eventsSubject(runId: string, prefix = DEFAULT_SUBJECT_PREFIX): string {
  return `${prefix}.v${PROTOCOL_VERSION}.events.${runId}`;
}

/** A NATS address as users give it: one URL, or a comma-separated list of a cluster's servers. */
export function natsServers(url: string): string[] {
  return url
    .split(',')
    .map((server) => server.trim())
    .filter(Boolean);
}

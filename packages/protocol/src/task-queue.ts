import { z } from 'zod';
import { PROTOCOL_VERSION } from './version.js';
import { TaskRoleSchema } from './roles.js';
import { WorkerInfoSchema } from './task.js';
import { LANE_PATTERN } from './subjects.js';

// Messages around the task queue (DESIGN §4): what a worker says when it takes a task or gives
// it back, what an agent host says when a worker died holding one, and the queue's figures.

const hex64 = z.string().regex(/^[a-f0-9]{64}$/);

/** On `polish.v1.progress.<role>.<key>`: a worker took the task (or gave it back to the queue). */
export const TaskProgressSchema = z.strictObject({
  v: z.literal(PROTOCOL_VERSION),
  taskId: z.string().min(1),
  /** `taken`: working on it; `released`: gave it back (its time ran out, or the worker is stopping). */
  state: z.enum(['taken', 'released']),
  /** JetStream's delivery count: 1 the first time the task is handed out, 2 after one redelivery, … */
  delivery: z.int().min(1),
  /** The task's sequence number in the task stream: tasks are handed out in this order. */
  queue_seq: z.int().min(1),
  /** The consumer's delivery sequence: the order in which the queue handed tasks out. */
  delivery_seq: z.int().min(1),
  worker: WorkerInfoSchema,
  reason: z.string().optional(),
});
export type TaskProgress = z.infer<typeof TaskProgressSchema>;

/** On `polish.v1.crashed.<role>`: an agent host saw a worker die holding a task; the orchestrator redelivers it at once. */
export const CrashNoticeSchema = z.strictObject({
  v: z.literal(PROTOCOL_VERSION),
  role: TaskRoleSchema,
  /** The task's idempotency key (its reply subject's last token). */
  key: hex64,
  taskId: z.string().min(1),
  delivery: z.int().min(1),
  worker: WorkerInfoSchema,
  reason: z.string(),
  /** The delivery's JetStream ack subject, so the orchestrator can hand the task out again. */
  ack: z.string().regex(/^\$JS\.ACK\./),
});
export type CrashNotice = z.infer<typeof CrashNoticeSchema>;

/** One role's queue as `polish status` and the inspector show it. */
export const QueueStatsSchema = z.strictObject({
  role: TaskRoleSchema,
  /** The model lane, for a lane's queue (a quorum judge's model); absent for the role's own queue. */
  lane: z.string().regex(LANE_PATTERN).optional(),
  /** Tasks waiting for a worker. */
  queued: z.int().min(0),
  /** Age of the oldest waiting task, or null when none waits. */
  oldest_ms: z.int().min(0).nullable(),
  /** Workers waiting for a task right now (open pull requests). */
  pulling: z.int().min(0),
  /** Tasks taken and not yet answered. */
  in_flight: z.int().min(0),
  /** How long ago a worker last took or answered one of the role's tasks; null if none ever did. */
  idle_ms: z.int().min(0).nullable(),
});
export type QueueStats = z.infer<typeof QueueStatsSchema>;

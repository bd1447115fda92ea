import { z } from 'zod';
import { LANE_PATTERN, TaskRoleSchema } from '@polish/protocol';
import { ModelSettingsSchema } from '../providers/model-settings.js';

/** The environment variable a host passes a worker's configuration in. */
export const WORKER_CONFIG_ENV = 'POLISH_WORKER_CONFIG';

/** TLS files (absolute paths): the CA that signed the server's certificate, and this side's own pair for mutual TLS. */
export const NatsTlsSchema = z.strictObject({
  caFile: z.string().min(1).optional(),
  certFile: z.string().min(1).optional(),
  keyFile: z.string().min(1).optional(),
});
export type NatsTls = z.infer<typeof NatsTlsSchema>;

/**
 * How a process connects as one principal: who it is (a user and password, or the file of its
 * NKEY seed: the seed itself never travels), its own inbox prefix, and its TLS files. Every part
 * is optional: a NATS that enforces no users needs no identity.
 */
export const NatsAuthSchema = z.strictObject({
  identity: z
    .union([
      z.strictObject({ user: z.string().min(1), pass: z.string().min(1) }),
      z.strictObject({ seedFile: z.string().min(1) }),
    ])
    .optional(),
  inboxPrefix: z.string().min(1).optional(),
  tls: NatsTlsSchema.optional(),
});
export type NatsAuth = z.infer<typeof NatsAuthSchema>;

/** What a worker process is told by its host: where NATS is, its role, its model. */
export const WorkerConfigSchema = z.strictObject({
  natsUrl: z.string().min(1),
  prefix: z.string().min(1),
  role: TaskRoleSchema,
  /** The model lane it serves instead of its role's queue (a quorum's judges on this model; see `modelLane`). */
  lane: z.string().regex(LANE_PATTERN).optional(),
  /** Tasks this process serves before it exits: 1 by default (single use). */
  reuse: z.int().min(1),
  model: ModelSettingsSchema,
  /** Its role's NATS identity and TLS files. */
  auth: NatsAuthSchema.optional(),
  /** par.command: what the host's operator allows critique commands. */
  command: z
    .strictObject({ allowUnsandboxed: z.boolean().optional(), env: z.array(z.string().min(1)).optional() })
    .optional(),
  /**
   * Booted in the background, at the lowest CPU priority: the worker takes no task until its host
   * says it has raised it back to normal priority (a {@link HostNotice} `raised`).
   */
  lowPriority: z.boolean().optional(),
});
export type WorkerConfig = z.infer<typeof WorkerConfigSchema>;

/**
 * What a worker measured of its own boot, in milliseconds: when its entry began to run (epoch
 * ms, `performance.timeOrigin + performance.now()`, so that its host can tell how long Node took
 * to get there), loading its code, loading the NATS client, then connecting (the model is made
 * meanwhile, from the start), the warm-up task, the model's own warm-up (an SDK's fetch) and finding its queue
 * (at once), sending its first pull, and the CPU
 * time the process had used when it was ready.
 */
export interface WorkerBoot {
  entryAt: number;
  code: number;
  nats: number;
  connect: number;
  warmUp: number;
  /** The model's own warm-up, part of `warmUp`: only for a model that has one (an SDK's). */
  modelWarmUp?: number;
  queue: number;
  cpuMs: number;
}

/** Messages a host sends its worker over IPC: `raised`, its priority is back to normal (see `lowPriority`). */
export type HostNotice = { type: 'raised' };

/** Messages a worker sends its host over IPC. */
export type WorkerNotice =
  | { type: 'started' }
  | { type: 'ready'; boot?: WorkerBoot }
  /** `ack`: the delivery's ack subject, so the host can have the task handed out again if this process dies. */
  | {
      type: 'task.taken';
      taskId: string;
      key: string;
      ack: string;
      delivery: number;
      queueSeq: number;
      deliverySeq: number;
    }
  /** The task waits on I/O (its model, a command): its handler did not finish within a turn of the event loop. */
  | { type: 'task.waiting'; taskId: string }
  | { type: 'task.done'; taskId: string; ok: boolean };

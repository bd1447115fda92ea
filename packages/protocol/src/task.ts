import { z } from 'zod';
import { PROTOCOL_VERSION } from './version.js';
import { CriteriaPayloadSchema, EvaluatePayloadSchema, RevisePayloadSchema } from './roles.js';
import { ParActPayloadSchema, ParCommandPayloadSchema, ParPlanPayloadSchema, ParReviewPayloadSchema } from './par.js';
import { ModelInfoSchema, UsageSchema } from './usage.js';
import { WireErrorSchema } from './errors.js';

const envelopeFields = {
  v: z.literal(PROTOCOL_VERSION),
  /** Opaque and random: it must not reveal the run or the iteration to the worker. */
  taskId: z.string().min(1),
  /** 1 for the first dispatch of this task (a redelivery by the queue keeps it; its count is JetStream's). */
  attempt: z.int().min(1),
  /** Epoch milliseconds after which nobody waits for the reply any more; 0: no such bound. */
  deadline: z.int().min(0),
  /** The most a worker may spend on the task once it has taken it (milliseconds). */
  timeoutMs: z.int().min(1).optional(),
  /**
   * A hash identifying the task (for durable runs: of run, wave, iteration and re-send), so a
   * repeated delivery can be recognised; it tells the worker nothing about the run or the
   * iteration. The reply goes to `polish.v1.reply.<role>.<idempotencyKey>`.
   */
  idempotencyKey: z
    .string()
    .regex(/^[a-f0-9]{64}$/)
    .optional(),
};

/** Work for one role. The payload is strict per role. */
export const TaskEnvelopeSchema = z.discriminatedUnion('role', [
  z.strictObject({ ...envelopeFields, role: z.literal('criteria'), payload: CriteriaPayloadSchema }),
  z.strictObject({ ...envelopeFields, role: z.literal('evaluate'), payload: EvaluatePayloadSchema }),
  z.strictObject({ ...envelopeFields, role: z.literal('revise'), payload: RevisePayloadSchema }),
  z.strictObject({ ...envelopeFields, role: z.literal('par.plan'), payload: ParPlanPayloadSchema }),
  z.strictObject({ ...envelopeFields, role: z.literal('par.act'), payload: ParActPayloadSchema }),
  z.strictObject({ ...envelopeFields, role: z.literal('par.review'), payload: ParReviewPayloadSchema }),
  z.strictObject({ ...envelopeFields, role: z.literal('par.command'), payload: ParCommandPayloadSchema }),
]);
export type TaskEnvelope = z.infer<typeof TaskEnvelopeSchema>;

/** Who handled a task: for logs, tests and the inspector. Never run state. */
export const WorkerInfoSchema = z.strictObject({
  pid: z.int(),
  hostname: z.string(),
});
export type WorkerInfo = z.infer<typeof WorkerInfoSchema>;

const replyFields = {
  v: z.literal(PROTOCOL_VERSION),
  taskId: z.string().min(1),
  usage: UsageSchema,
  worker: WorkerInfoSchema,
};

/** A worker's answer: the role's result (validated again by the orchestrator) or a coded error. Roles that call no model (par.command) name `{provider: "none", model: "none"}`. */
export const TaskReplySchema = z.discriminatedUnion('ok', [
  z.strictObject({ ...replyFields, ok: z.literal(true), result: z.unknown(), model: ModelInfoSchema }),
  z.strictObject({ ...replyFields, ok: z.literal(false), error: WireErrorSchema, model: ModelInfoSchema.optional() }),
]);
export type TaskReply = z.infer<typeof TaskReplySchema>;

import { z } from 'zod';
import { RunResultSchema, RunStatusSchema } from './run-result.js';
import { MAX_CAP } from './run-spec.js';
import { QueueStatsSchema } from './task-queue.js';

/** A run id: what KV keys and subjects allow. */
export const RunIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,100}$/, 'a run id is 1-100 letters, digits, - or _');

/** submit: a spec (validated as RunSpec by the service), and optionally the run id to use. */
export const SubmitRequestSchema = z.strictObject({ spec: z.unknown(), runId: RunIdSchema.optional() });
/** status, cancel, resume. */
export const RunIdRequestSchema = z.strictObject({ runId: RunIdSchema });
/** extend: a run that reached its cap gets a higher one (criteria unchanged). */
export const ExtendRequestSchema = z.strictObject({ runId: RunIdSchema, cap: z.int().min(2).max(MAX_CAP) });

/** What the service says about a run. */
export const RunSummarySchema = z.strictObject({
  runId: RunIdSchema,
  /** `CORRUPT`: the stored record does not parse or restore; it is kept aside, with the reason in `problem`. */
  status: z.union([z.literal('RUNNING'), z.literal('CORRUPT'), RunStatusSchema]),
  state: z.string(),
  iteration: z.int().min(0),
  cap: z.int(),
  owner: z.string(),
  machineVersion: z.int(),
  createdAt: z.int(),
  updatedAt: z.int(),
  result: RunResultSchema.optional(),
  /** Why the run cannot go on here (e.g. a snapshot from another machine version). */
  problem: z.string().optional(),
});
export type RunSummary = z.infer<typeof RunSummarySchema>;

/** Every reply of the run service. */
export const RunServiceReplySchema = z.discriminatedUnion('ok', [
  z.strictObject({
    ok: z.literal(true),
    run: RunSummarySchema.optional(),
    runs: z.array(RunSummarySchema).optional(),
    /** `queues`: each role's task queue. */
    queues: z.array(QueueStatsSchema).optional(),
  }),
  z.strictObject({
    ok: z.literal(false),
    code: z.enum(['INVALID_INPUT', 'NOT_FOUND', 'CONFLICT', 'INTERNAL']),
    message: z.string(),
  }),
]);
export type RunServiceReply = z.infer<typeof RunServiceReplySchema>;

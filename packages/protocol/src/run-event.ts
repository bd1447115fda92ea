import { z } from 'zod';
import { RoleSchema } from './roles.js';
import { CriteriaListSchema } from './criteria.js';
import { ModelInfoSchema, UsageSchema } from './usage.js';
import { CostSchema, RunStatusSchema } from './run-result.js';
import { WorkerInfoSchema } from './task.js';

const eventFields = { runId: z.string().min(1), at: z.int().min(0) };

/** What a run reports as it goes: published on `polish.v1.events.<runId>`. */
export const RunEventSchema = z.discriminatedUnion('type', [
  z.strictObject({ ...eventFields, type: z.literal('run.started'), cap: z.int(), threshold: z.string() }),
  z.strictObject({ ...eventFields, type: z.literal('state.entered'), state: z.string() }),
  z.strictObject({ ...eventFields, type: z.literal('wave.started'), role: RoleSchema, iteration: z.int().min(0) }),
  z.strictObject({
    ...eventFields,
    type: z.literal('wave.finished'),
    role: RoleSchema,
    iteration: z.int().min(0),
    duration_ms: z.number().min(0),
    usage: UsageSchema,
    model: ModelInfoSchema,
    /** The process that answered, and how many dispatches it took (retries and re-dispatches included). */
    worker: WorkerInfoSchema,
    attempts: z.int().min(1),
  }),
  z.strictObject({ ...eventFields, type: z.literal('criteria.locked'), criteria: CriteriaListSchema, extracted: z.boolean() }),
  z.strictObject({
    ...eventFields,
    type: z.literal('iteration.evaluated'),
    iteration: z.int().min(1),
    passed: z.int(),
    total: z.int(),
    blocking_gaps: z.array(z.string()),
  }),
  /** An iteration is over (its evaluation, and the revision that followed it if any): its usage. */
  z.strictObject({ ...eventFields, type: z.literal('iteration.finished'), iteration: z.int().min(1), usage: UsageSchema }),
  z.strictObject({
    ...eventFields,
    type: z.literal('run.finished'),
    status: RunStatusSchema,
    iterations: z.int(),
    usage: UsageSchema,
    cost: CostSchema.optional(),
  }),
]);
export type RunEvent = z.infer<typeof RunEventSchema>;

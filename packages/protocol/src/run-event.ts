import { z } from 'zod';
import { TaskRoleSchema } from './roles.js';
import { AnyPolicyDecisionSchema } from './par-goal.js';
import { AcceptanceListSchema, CritiqueSourceSchema, ParCycleRecordSchema, ParFinalStatusSchema } from './par.js';
import { CriteriaListSchema } from './criteria.js';
import { ModelInfoSchema, UsageSchema } from './usage.js';
import { CostSchema, RunStatusSchema } from './run-result.js';
import { WorkerInfoSchema } from './task.js';
import { RevisionReportSchema } from './revision.js';
import { CriterionVerdictSchema, JudgementSchema } from './quorum.js';
import { ScoreSchema } from './evaluation.js';
import { BudgetReportSchema, QuorumReportSchema } from './run-result.js';

const eventFields = { runId: z.string().min(1), at: z.int().min(0) };

/** What a run reports as it goes: published on `polish.v1.events.<runId>`. */
export const RunEventSchema = z.discriminatedUnion('type', [
  z.strictObject({ ...eventFields, type: z.literal('run.started'), cap: z.int(), threshold: z.string() }),
  z.strictObject({ ...eventFields, type: z.literal('state.entered'), state: z.string() }),
  z.strictObject({
    ...eventFields,
    type: z.literal('wave.started'),
    role: TaskRoleSchema,
    iteration: z.int().min(0),
    /** A judge of a quorum (1..k): each evaluates the same payload in its own process. */
    judge: z.int().min(1).optional(),
    /** What the agent received (for inspection), left out above EVENT_PAYLOAD_LIMIT bytes. */
    payload: z.unknown().optional(),
    payload_bytes: z.int().min(0).optional(),
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('wave.finished'),
    role: TaskRoleSchema,
    iteration: z.int().min(0),
    judge: z.int().min(1).optional(),
    /** Fields of the answer the contract does not know, dropped before validation (e.g. `overall`). */
    dropped_fields: z.array(z.string()).optional(),
    duration_ms: z.number().min(0),
    usage: UsageSchema,
    model: ModelInfoSchema,
    /** The process that answered, and how many dispatches it took (retries and re-dispatches included). */
    worker: WorkerInfoSchema,
    attempts: z.int().min(1),
    /** What the agent returned (for inspection), left out above EVENT_PAYLOAD_LIMIT bytes. */
    result: z.unknown().optional(),
    result_bytes: z.int().min(0).optional(),
    /** Time the task waited in the queue for a worker, and the time its worker spent on it. */
    queued_ms: z.number().min(0).optional(),
    work_ms: z.number().min(0).optional(),
  }),
  // The task queue: a wave's task was queued, still waits (every few seconds), was taken, or was given back.
  z.strictObject({
    ...eventFields,
    type: z.literal('task.queued'),
    role: TaskRoleSchema,
    iteration: z.int().min(0),
    judge: z.int().min(1).optional(),
    /** Tasks of the role waiting before this one was queued. */
    ahead: z.int().min(0),
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('task.waiting'),
    role: TaskRoleSchema,
    iteration: z.int().min(0),
    judge: z.int().min(1).optional(),
    queued: z.int().min(0),
    pulling: z.int().min(0),
    in_flight: z.int().min(0),
    waited_ms: z.number().min(0),
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('task.taken'),
    role: TaskRoleSchema,
    iteration: z.int().min(0),
    judge: z.int().min(1).optional(),
    worker: WorkerInfoSchema,
    delivery: z.int().min(1),
    queued_ms: z.number().min(0),
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('task.released'),
    role: TaskRoleSchema,
    iteration: z.int().min(0),
    judge: z.int().min(1).optional(),
    worker: WorkerInfoSchema,
    delivery: z.int().min(1),
    reason: z.string(),
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('criteria.locked'),
    criteria: CriteriaListSchema,
    extracted: z.boolean(),
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('iteration.evaluated'),
    iteration: z.int().min(1),
    passed: z.int(),
    total: z.int(),
    blocking_gaps: z.array(z.string()),
    /** The orchestrator's scores (with quorum: the combined verdict), quotes included. */
    scores: z.array(ScoreSchema).optional(),
    /** With several judges: each judge's scores, every criterion's verdict and agreement. */
    judges: z.array(JudgementSchema).optional(),
    verdicts: z.record(z.string(), CriterionVerdictSchema).optional(),
    agreement: z.record(z.string(), z.number()).optional(),
    /** Criteria the revision into this version broke (they passed on the version it started from). */
    regressions: z.array(z.string()).optional(),
  }),
  /** A revision broke criteria that passed: the reviser is asked again, once, from the version before it. */
  z.strictObject({
    ...eventFields,
    type: z.literal('regression.re_ask'),
    iteration: z.int().min(1),
    /** The iteration whose version is revised again. */
    from: z.int().min(1),
    criteria: z.array(z.string()),
  }),
  /** The run stops: the rest of its budget cannot cover the next wave's worst case. */
  z.strictObject({ ...eventFields, type: z.literal('budget.exhausted'), ...BudgetReportSchema.shape }),
  /** The revision made from an iteration's version: its form, edits, the criteria they claim, its size. */
  z.strictObject({
    ...eventFields,
    type: z.literal('iteration.revised'),
    iteration: z.int().min(1),
    ...RevisionReportSchema.shape,
  }),
  /** An iteration is over (its evaluation, and the revision that followed it if any): its usage. */
  z.strictObject({
    ...eventFields,
    type: z.literal('iteration.finished'),
    iteration: z.int().min(1),
    usage: UsageSchema,
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('run.finished'),
    status: RunStatusSchema,
    iterations: z.int(),
    usage: UsageSchema,
    cost: CostSchema.optional(),
    /** With several judges: the run's agreement rate and undecided verdicts. */
    quorum: QuorumReportSchema.optional(),
    /** With a budget: what it allowed and what was spent. */
    budget: BudgetReportSchema.optional(),
  }),
  // Plan-act-reflect runs: the task, each recorded cycle, each policy decision, and the end.
  z.strictObject({
    ...eventFields,
    type: z.literal('par.started'),
    topic: z.string(),
    goal: z.string(),
    acceptance_criteria: AcceptanceListSchema,
    critique_source: CritiqueSourceSchema,
    /** Cycles already recorded when this run (a resume) started. */
    cycles_before: z.int().min(0),
  }),
  z.strictObject({
    ...eventFields,
    type: z.literal('par.cycle'),
    record: ParCycleRecordSchema,
    checkpoint_status: z.string(),
  }),
  z.strictObject({ ...eventFields, type: z.literal('par.decision'), decision: AnyPolicyDecisionSchema }),
  z.strictObject({
    ...eventFields,
    type: z.literal('par.finished'),
    final_status: ParFinalStatusSchema,
    reason: z.string(),
    cycles: z.int().min(0),
  }),
]);

/** Payloads and results larger than this are left out of events (the stream keeps messages small). */
export const EVENT_PAYLOAD_LIMIT = 256 * 1024;
export type RunEvent = z.infer<typeof RunEventSchema>;

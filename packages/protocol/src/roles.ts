import { z } from 'zod';
import { CriteriaListSchema, CriteriaResultSchema } from './criteria.js';
import { EvaluationSchema } from './evaluation.js';
import { ReviseAnswerSchema } from './revision.js';
import {
  ParActPayloadSchema,
  ParActionSchema,
  ParCommandPayloadSchema,
  ParCommandResultSchema,
  ParPlanPayloadSchema,
  ParPlanSchema,
  ParReviewPayloadSchema,
  ParReviewSchema,
  ParRoleSchema,
  type ParRole,
} from './par.js';

/** The polish loop's agent roles, one per wave. */
export const RoleSchema = z.enum(['criteria', 'evaluate', 'revise']);
export type Role = z.infer<typeof RoleSchema>;

/** Every role a task can be sent to: the polish loop's three and the plan-act-reflect roles. */
export const TaskRoleSchema = z.enum([...RoleSchema.options, ...ParRoleSchema.options]);
export type TaskRole = Role | ParRole;

/** Which wave each role serves. */
export const WAVE_OF_ROLE: Readonly<Record<Role, 1 | 2 | 3>> = { criteria: 1, evaluate: 2, revise: 3 };

/** Wave 1 input: the artifact and the goal. */
export const CriteriaPayloadSchema = z.strictObject({
  artifact: z.string().min(1),
  goal: z.string().min(1),
});
/**
 * Wave 2 input: exactly the artifact and the locked criteria. Strict, so a run id,
 * iteration number or earlier verdict is rejected before any model sees it.
 */
export const EvaluatePayloadSchema = z.strictObject({
  artifact: z.string().min(1),
  criteria: CriteriaListSchema,
});
/** Wave 3 input: the artifact, the blocking gaps ("C2: …") and the goal; no scores, no criteria list. */
export const RevisePayloadSchema = z.strictObject({
  artifact: z.string().min(1),
  blocking_gaps: z.array(z.string().min(1)).min(1),
  goal: z.string().min(1),
});
export type CriteriaPayload = z.infer<typeof CriteriaPayloadSchema>;
export type EvaluatePayload = z.infer<typeof EvaluatePayloadSchema>;
export type RevisePayload = z.infer<typeof RevisePayloadSchema>;

/** Payload schema per role. */
export const PAYLOAD_SCHEMAS = {
  criteria: CriteriaPayloadSchema,
  evaluate: EvaluatePayloadSchema,
  revise: RevisePayloadSchema,
  'par.plan': ParPlanPayloadSchema,
  'par.act': ParActPayloadSchema,
  'par.review': ParReviewPayloadSchema,
  'par.command': ParCommandPayloadSchema,
} as const;
/** Result schema per role (the evaluate result is further checked against the locked criteria). */
export const RESULT_SCHEMAS = {
  criteria: CriteriaResultSchema,
  evaluate: EvaluationSchema,
  revise: ReviseAnswerSchema,
  'par.plan': ParPlanSchema,
  'par.act': ParActionSchema,
  'par.review': ParReviewSchema,
  'par.command': ParCommandResultSchema,
} as const;

/** The payload type of a role. */
export type PayloadOf<R extends TaskRole> = z.infer<(typeof PAYLOAD_SCHEMAS)[R]>;
/** The result type of a role. */
export type ResultOf<R extends TaskRole> = z.infer<(typeof RESULT_SCHEMAS)[R]>;

import { z } from 'zod';
import { CriteriaListSchema, CriteriaResultSchema, CriterionSchema } from './criteria.js';
import { EvaluationSchema, ScoreSchema } from './evaluation.js';
import { ReviseAnswerSchema } from './revision.js';
import { RunSpecSchema } from './run-spec.js';
import { CriteriaPayloadSchema, EvaluatePayloadSchema, RevisePayloadSchema } from './roles.js';
import { TaskEnvelopeSchema, TaskReplySchema } from './task.js';
import { CrashNoticeSchema, QueueStatsSchema, TaskProgressSchema } from './task-queue.js';
import { RunResultSchema } from './run-result.js';
import { RunEventSchema } from './run-event.js';
import { PriceTableSchema, UsageSchema } from './usage.js';
import { ExtendRequestSchema, RunIdRequestSchema, RunServiceReplySchema, SubmitRequestSchema } from './run-service.js';
import { ParCheckpointSchema, ParPolicySchema, PolicyDecisionSchema } from './par-policy.js';
import { GoalCheckpointSchema, GoalDecisionSchema, GoalPolicySchema } from './par-goal.js';
import {
  ParActPayloadSchema,
  ParActionSchema,
  ParCommandPayloadSchema,
  ParCommandResultSchema,
  ParPlanPayloadSchema,
  ParPlanSchema,
  ParReviewPayloadSchema,
  ParReviewSchema,
  ParTaskFileSchema,
} from './par.js';

/** Every wire schema, by the file name its JSON Schema is published under. */
const WIRE_SCHEMAS = {
  'run-spec': RunSpecSchema,
  criterion: CriterionSchema,
  'criteria-list': CriteriaListSchema,
  'criteria-result': CriteriaResultSchema,
  score: ScoreSchema,
  evaluation: EvaluationSchema,
  revision: ReviseAnswerSchema,
  'payload.criteria': CriteriaPayloadSchema,
  'payload.evaluate': EvaluatePayloadSchema,
  'payload.revise': RevisePayloadSchema,
  'task-envelope': TaskEnvelopeSchema,
  'task-reply': TaskReplySchema,
  'task-progress': TaskProgressSchema,
  'crash-notice': CrashNoticeSchema,
  'queue-stats': QueueStatsSchema,
  'run-result': RunResultSchema,
  'run-event': RunEventSchema,
  usage: UsageSchema,
  'price-table': PriceTableSchema,
  'run-service.submit': SubmitRequestSchema,
  'run-service.run-id': RunIdRequestSchema,
  'run-service.extend': ExtendRequestSchema,
  'run-service.reply': RunServiceReplySchema,
  'par.policy': ParPolicySchema,
  'par.checkpoint': ParCheckpointSchema,
  'par.policy-decision': PolicyDecisionSchema,
  'par.goal-policy': GoalPolicySchema,
  'par.goal-checkpoint': GoalCheckpointSchema,
  'par.goal-decision': GoalDecisionSchema,
  'payload.par.plan': ParPlanPayloadSchema,
  'payload.par.act': ParActPayloadSchema,
  'payload.par.review': ParReviewPayloadSchema,
  'payload.par.command': ParCommandPayloadSchema,
  'par.plan': ParPlanSchema,
  'par.action': ParActionSchema,
  'par.review': ParReviewSchema,
  'par.command-result': ParCommandResultSchema,
  'par.task-file': ParTaskFileSchema,
} as const;

/**
 * The JSON Schema documents for other languages, as file name → text. Checks zod cannot
 * express in JSON Schema (unique ids, scores covering the locked criteria) are stated in
 * each document's description and enforced on both sides of the wire.
 */
export function renderJsonSchemas(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [name, schema] of Object.entries(WIRE_SCHEMAS)) {
    const document = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
    files[`${name}.schema.json`] = `${JSON.stringify({ $id: `polish/v1/${name}`, ...document }, null, 2)}\n`;
  }
  return files;
}

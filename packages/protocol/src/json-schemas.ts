import { z } from 'zod';
import { CriteriaListSchema, CriteriaResultSchema, CriterionSchema } from './criteria.js';
import { EvaluationSchema, ScoreSchema } from './evaluation.js';
import { ReviseAnswerSchema } from './revision.js';
import { RunSpecSchema } from './run-spec.js';
import { PAYLOAD_SCHEMAS, RESULT_SCHEMAS } from './roles.js';
import { TaskEnvelopeSchema, TaskReplySchema } from './task.js';
import { CrashNoticeSchema, QueueStatsSchema, TaskProgressSchema } from './task-queue.js';
import { RunResultSchema } from './run-result.js';
import { RunEventSchema } from './run-event.js';
import { PriceTableSchema, UsageSchema } from './usage.js';
import { ExtendRequestSchema, RunIdRequestSchema, RunServiceReplySchema, SubmitRequestSchema } from './run-service.js';
import { ParCheckpointSchema, ParPolicySchema, PolicyDecisionSchema } from './par-policy.js';
import { GoalCheckpointSchema, GoalDecisionSchema, GoalPolicySchema } from './par-goal.js';
import { ParTaskFileSchema } from './par.js';

/** Every wire schema, by the file name its JSON Schema is published under. */
const WIRE_SCHEMAS = {
  'run-spec': RunSpecSchema,
  criterion: CriterionSchema,
  'criteria-list': CriteriaListSchema,
  'criteria-result': CriteriaResultSchema,
  score: ScoreSchema,
  evaluation: EvaluationSchema,
  revision: ReviseAnswerSchema,
  'payload.criteria': PAYLOAD_SCHEMAS.criteria,
  'payload.evaluate': PAYLOAD_SCHEMAS.evaluate,
  'payload.revise': PAYLOAD_SCHEMAS.revise,
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
  'payload.par.plan': PAYLOAD_SCHEMAS['par.plan'],
  'payload.par.act': PAYLOAD_SCHEMAS['par.act'],
  'payload.par.review': PAYLOAD_SCHEMAS['par.review'],
  'payload.par.command': PAYLOAD_SCHEMAS['par.command'],
  'par.plan': RESULT_SCHEMAS['par.plan'],
  'par.action': RESULT_SCHEMAS['par.act'],
  'par.review': RESULT_SCHEMAS['par.review'],
  'par.command-result': RESULT_SCHEMAS['par.command'],
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

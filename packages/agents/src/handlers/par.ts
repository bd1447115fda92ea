import {
  ParActionSchema,
  ParPlanSchema,
  ParReviewSchema,
  parReviewSchemaFor,
  type ParAction,
  type ParActPayload,
  type ParPlan,
  type ParPlanPayload,
  type ParReview,
  type ParReviewPayload,
} from '@polish/protocol';
import type { ModelProvider } from '../providers/model-provider.js';
import { ACT_SYSTEM, PLAN_SYSTEM, REVIEW_SYSTEM, actPrompt, planPrompt, reviewPrompt } from '../par-prompts.js';
import { generateValidated } from '../generate-validated.js';
import { answerJsonSchema, type HandlerOutput } from './handler.js';

const PLAN_JSON_SCHEMA = answerJsonSchema(ParPlanSchema);
const ACTION_JSON_SCHEMA = answerJsonSchema(ParActionSchema);
const REVIEW_JSON_SCHEMA = answerJsonSchema(ParReviewSchema);

/** `par.plan`: the smallest next action, given the agent's own earlier cycles. */
export function plan(payload: ParPlanPayload, model: ModelProvider): Promise<HandlerOutput<ParPlan>> {
  return generateValidated({
    model,
    role: 'par.plan',
    system: PLAN_SYSTEM,
    prompt: planPrompt(payload),
    schema: ParPlanSchema,
    jsonSchema: PLAN_JSON_SCHEMA,
    payload,
  });
}

/** `par.act`: the plan carried out as whole-file writes, with a self-assessment. */
export function act(payload: ParActPayload, model: ModelProvider): Promise<HandlerOutput<ParAction>> {
  return generateValidated({
    model,
    role: 'par.act',
    system: ACT_SYSTEM,
    prompt: actPrompt(payload),
    schema: ParActionSchema,
    jsonSchema: ACTION_JSON_SCHEMA,
    payload,
  });
}

/** `par.review`: a stateless reviewer judging exactly the criteria given. */
export function review(payload: ParReviewPayload, model: ModelProvider): Promise<HandlerOutput<ParReview>> {
  return generateValidated({
    model,
    role: 'par.review',
    system: REVIEW_SYSTEM,
    prompt: reviewPrompt(payload),
    schema: parReviewSchemaFor(payload.acceptance_criteria),
    jsonSchema: REVIEW_JSON_SCHEMA,
    payload,
  });
}

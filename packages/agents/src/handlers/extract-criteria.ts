import { CriteriaResultSchema, type CriteriaPayload, type CriteriaResult } from '@polish/protocol';
import type { ModelProvider } from '../providers/model-provider.js';
import { CRITERIA_SYSTEM, criteriaPrompt } from '../prompts.js';
import { generateValidated } from '../generate-validated.js';
import { answerJsonSchema, type HandlerOutput } from './handler.js';

const ANSWER_JSON_SCHEMA = answerJsonSchema(CriteriaResultSchema);

/** Wave 1: reads artifact + goal, returns 1..8 falsifiable criteria. */
export function extractCriteria(
  payload: CriteriaPayload,
  model: ModelProvider,
): Promise<HandlerOutput<CriteriaResult>> {
  return generateValidated({
    model,
    role: 'criteria',
    system: CRITERIA_SYSTEM,
    prompt: criteriaPrompt(payload),
    schema: CriteriaResultSchema,
    jsonSchema: ANSWER_JSON_SCHEMA,
    payload,
  });
}

import {
  EvaluationSchema,
  evaluationSchemaFor,
  type Criterion,
  type EvaluatePayload,
  type Evaluation,
} from '@polish/protocol';
import type { ModelProvider } from '../providers/model-provider.js';
import { EVALUATE_SYSTEM, EVALUATE_SYSTEM_WITHOUT_EVIDENCE, evaluatePrompt } from '../prompts.js';
import { generateValidated } from '../generate-validated.js';
import { answerJsonSchema, type HandlerOutput } from './handler.js';

const BASE_JSON_SCHEMA = answerJsonSchema(EvaluationSchema);

/** The answer's JSON Schema narrowed to the locked ids: one score per criterion, no other id. */
function evaluationJsonSchema(criteria: readonly Criterion[]): Record<string, unknown> {
  const schema = structuredClone(BASE_JSON_SCHEMA) as {
    properties: {
      scores: { minItems?: number; maxItems?: number; items: { properties: { criterion_id: { enum?: string[] } } } };
    };
  };
  schema.properties.scores.minItems = criteria.length;
  schema.properties.scores.maxItems = criteria.length;
  schema.properties.scores.items.properties.criterion_id.enum = criteria.map((criterion) => criterion.id);
  return schema;
}

/**
 * Wave 2: scores the artifact against exactly the locked criteria; knows nothing else. Every
 * quote must be found in the artifact it was given (an invented quote is re-asked like any
 * broken answer), and unless the worker's answer settings turn evidence off, every pass quotes.
 */
export function evaluate(payload: EvaluatePayload, model: ModelProvider): Promise<HandlerOutput<Evaluation>> {
  const evidence = model.answers?.evidence ?? true;
  return generateValidated({
    model,
    role: 'evaluate',
    system: evidence ? EVALUATE_SYSTEM : EVALUATE_SYSTEM_WITHOUT_EVIDENCE,
    prompt: evaluatePrompt(payload),
    schema: evaluationSchemaFor(payload.criteria, { artifact: payload.artifact, evidence }),
    jsonSchema: evaluationJsonSchema(payload.criteria),
    payload,
  });
}

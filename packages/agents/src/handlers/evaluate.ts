import { evaluationSchemaFor, type EvaluatePayload, type Evaluation } from '@polish/protocol';
import type { ModelProvider } from '../providers/model-provider.js';
import { EVALUATE_SYSTEM, evaluatePrompt } from '../prompts.js';
import { generateValidated } from '../generate-validated.js';
import type { HandlerOutput } from './handler.js';

/** Wave 2: scores the artifact against exactly the locked criteria; knows nothing else. */
export function evaluate(payload: EvaluatePayload, model: ModelProvider): Promise<HandlerOutput<Evaluation>> {
  return generateValidated({
    model,
    role: 'evaluate',
    system: EVALUATE_SYSTEM,
    prompt: evaluatePrompt(payload),
    schema: evaluationSchemaFor(payload.criteria),
    payload,
  });
}

import { RevisionSchema, type RevisePayload, type Revision } from '@polish/protocol';
import type { ModelProvider } from '../providers/model-provider.js';
import { REVISE_SYSTEM, revisePrompt } from '../prompts.js';
import { generateValidated } from '../generate-validated.js';
import { answerJsonSchema, type HandlerOutput } from './handler.js';

const ANSWER_JSON_SCHEMA = answerJsonSchema(RevisionSchema);

/** Wave 3: returns the full artifact revised to close the blocking gaps. */
export function revise(payload: RevisePayload, model: ModelProvider): Promise<HandlerOutput<Revision>> {
  return generateValidated({
    model,
    role: 'revise',
    system: REVISE_SYSTEM,
    prompt: revisePrompt(payload),
    schema: RevisionSchema,
    jsonSchema: ANSWER_JSON_SCHEMA,
    payload,
  });
}

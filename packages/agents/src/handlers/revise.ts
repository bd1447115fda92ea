import {
  PolishError,
  RevisionSchema,
  ZERO_USAGE,
  addUsage,
  editsSchemaFor,
  usesEdits,
  EditsRevisionSchema,
  type ReviseAnswer,
  type RevisePayload,
} from '@polish/protocol';
import type { ModelProvider } from '../providers/model-provider.js';
import { REVISE_EDITS_SYSTEM, REVISE_SYSTEM, revisePrompt } from '../prompts.js';
import { DEFAULT_MAX_REPAIRS, generateValidated } from '../generate-validated.js';
import { answerJsonSchema, type HandlerOutput } from './handler.js';

const FULL_JSON_SCHEMA = answerJsonSchema(RevisionSchema);
const EDITS_JSON_SCHEMA = answerJsonSchema(EditsRevisionSchema);

/**
 * One Wave 3 request: in full-text form the whole artifact, revised; in edit form, edits that
 * apply exactly once each to the artifact given (checked before answering).
 */
function reviseAs(form: 'full' | 'edits', payload: RevisePayload, model: ModelProvider, maxRepairs: number) {
  return generateValidated<ReviseAnswer>({
    model,
    role: 'revise',
    system: form === 'full' ? REVISE_SYSTEM : REVISE_EDITS_SYSTEM,
    prompt: revisePrompt(payload),
    schema: form === 'full' ? RevisionSchema : editsSchemaFor(payload),
    jsonSchema: form === 'full' ? FULL_JSON_SCHEMA : EDITS_JSON_SCHEMA,
    payload,
    maxRepairs,
  });
}

/**
 * Wave 3: closes the blocking gaps, answering with edits or the whole text as the worker's
 * answer settings say (default `auto`: edits for long artifacts). In `auto`, when the edits
 * are still invalid after one re-ask citing the failing edit, the last call asks for the whole
 * text instead: a task makes at most 1 + DEFAULT_MAX_REPAIRS model calls in every mode.
 */
export async function revise(payload: RevisePayload, model: ModelProvider): Promise<HandlerOutput<ReviseAnswer>> {
  const mode = model.answers?.revise ?? 'auto';
  if (!usesEdits(mode, payload.artifact)) return reviseAs('full', payload, model, DEFAULT_MAX_REPAIRS);
  if (mode === 'edits') return reviseAs('edits', payload, model, DEFAULT_MAX_REPAIRS);
  try {
    return await reviseAs('edits', payload, model, DEFAULT_MAX_REPAIRS - 1);
  } catch (error) {
    const failure = PolishError.from(error);
    if (failure.code !== 'CONTRACT_VIOLATION') throw failure;
    // Edits keep failing: this model gets the full-text form, as a fresh request.
    const spent = failure.usage;
    try {
      const full = await reviseAs('full', payload, model, 0);
      return spent ? { ...full, usage: addUsage(spent, full.usage) } : full;
    } catch (fullError) {
      const fullFailure = PolishError.from(fullError);
      throw spent ? fullFailure.withUsage(addUsage(spent, fullFailure.usage ?? ZERO_USAGE), model.info) : fullFailure;
    }
  }
}

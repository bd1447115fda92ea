import { existsSync, readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { REPO } from './cli.js';

// The public agent-collab-harness JSON Schemas: what polish writes and prints must validate.

/** The folder of the public samples and schemas: beside the repository when it is there, else the test copies. */
export const AGENT_COLLAB = existsSync(`${REPO}../shared/agent-collab/`)
  ? `${REPO}../shared/agent-collab/`
  : `${REPO}test/fixtures/agent-collab/`;

const NAMES = [
  'agent-policy-1',
  'agent-policy-2',
  'task-checkpoint-1',
  'task-checkpoint-2',
  'policy-decision-1',
  'policy-decision-2',
] as const;

const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats.default(ajv);
for (const name of NAMES) ajv.addSchema(JSON.parse(readFileSync(`${AGENT_COLLAB}${name}.json`, 'utf8')), name);

/** The schema's errors for a document, as one line each ([] when it validates). */
export function schemaErrors(name: (typeof NAMES)[number], document: unknown): string[] {
  const validate = ajv.getSchema(name);
  if (!validate) throw new Error(`no schema ${name}`);
  return validate(document) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message}`);
}

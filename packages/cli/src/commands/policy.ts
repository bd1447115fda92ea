import { readFileSync } from 'node:fs';
import { basename, extname } from 'node:path';
import {
  evaluatePolicy,
  failClosed,
  humanKeysFrom,
  isVersionTwo,
  parseStrictJson,
  policyHash,
  prettySortedJson,
  validateGoalPolicy,
  validatePolicy,
} from '@polish/orchestrator';
import { invalidInput } from '@polish/protocol';
import { EXIT, POLICY_EXIT } from '../exit-codes.js';

// `polish policy validate|evaluate`: the agent-collab harness's `agent-collab policy …`, with its
// outputs (JSON, keys sorted) and exit codes: 0 valid or continue, 3 checkpoint, 4 stop (every
// evaluation error fails closed to stop), 2 an invalid document to validate, or a command line
// polish cannot act on (a missing flag, a path it cannot read).

/** A path given on the command line that cannot be read: the command cannot run (exit 2). */
export class UnreadablePath extends Error {}

/** Reads a path given on the command line. Throws UnreadablePath when it cannot be read. */
export function readArgument(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UnreadablePath(
      `cannot read JSON object ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

/** Parses a document as the harness does (strict JSON, an object). Throws an Error naming the problem. */
export function parseDocument(text: string, path: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = parseStrictJson(text);
  } catch (error) {
    throw new Error(`cannot read JSON object ${path}: ${(error as Error).message}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error(`expected JSON object: ${path}`);
  return value as Record<string, unknown>;
}

/** Prints a value as the harness does: JSON, keys sorted, indented by 2. */
export const emit = (value: unknown) => process.stdout.write(prettySortedJson(value));

/** `{schema_version 1, ok false, kind, path, errors}`: the harness's answer for an invalid document. */
export const invalidDocument = (kind: string, path: string, error: unknown) => ({
  schema_version: 1,
  ok: false,
  kind,
  path,
  errors: [(error as Error).message],
});

const required = (value: string | undefined, flag: string, what: string): string => {
  if (!value) throw invalidInput(flag, `required: --${flag} ${what}`);
  return value;
};

/** `polish policy validate --policy P`: the policy's id and hash, or why it is invalid (exit 2). */
export function policyValidateCommand(flags: { policy?: string }): number {
  const path = required(flags.policy, 'policy', 'file.json');
  try {
    const document = parseDocument(readArgument(path), path);
    const policy = isVersionTwo(document) ? validateGoalPolicy(document) : validatePolicy(document);
    emit({
      schema_version: 1,
      ok: true,
      kind: 'policy',
      path,
      policy_id: policy.policy_id,
      policy_hash: policyHash(document),
      errors: [],
      valid: true,
    });
    return EXIT.CONVERGED;
  } catch (error) {
    emit({ ...invalidDocument('policy', path, error), valid: false, error: (error as Error).message });
    return EXIT.INVALID_INPUT;
  }
}

/**
 * `polish policy evaluate --policy P --checkpoint C`: the decision (policy-decision-1, or -2 for
 * goal slices) and its exit code. Invalid input fails closed: the `stop` decision, exit 4; a path
 * that cannot be read also prints that decision, and exits 2.
 */
export function policyEvaluateCommand(flags: { policy?: string; checkpoint?: string }): number {
  const policyPath = required(flags.policy, 'policy', 'file.json');
  const checkpointPath = required(flags.checkpoint, 'checkpoint', 'file.json');
  const policyName = basename(policyPath, extname(policyPath));
  try {
    const checkpointText = readArgument(checkpointPath);
    const policyText = readArgument(policyPath);
    const checkpoint = parseDocument(checkpointText, checkpointPath);
    const policy = parseDocument(policyText, policyPath);
    const decision = evaluatePolicy({ policy, checkpoint, policyName, humanKeys: humanKeysFrom() });
    emit(decision);
    return POLICY_EXIT[decision.decision];
  } catch (error) {
    emit(failClosed(policyName, (error as Error).message));
    if (error instanceof UnreadablePath) {
      process.stderr.write(`polish: invalid input: ${error.message}\n`);
      return EXIT.INVALID_INPUT;
    }
    return POLICY_EXIT.stop;
  }
}

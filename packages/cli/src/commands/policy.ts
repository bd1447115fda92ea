import { readFileSync } from 'node:fs';
import { basename, extname } from 'node:path';
import { evaluatePolicy, failClosed, humanKeysFrom, policyHash, validatePolicy } from '@polish/orchestrator';
import { PolishError, invalidInput } from '@polish/protocol';
import { POLICY_EXIT } from '../exit-codes.js';

function readJson(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new PolishError('INVALID_INPUT', `${basename(path)} is not JSON (${(error as Error).message})`, {
      field: basename(path),
    });
  }
}

const versionTwo = (document: unknown) => (document as { schema_version?: unknown } | null)?.schema_version === 2;
const v2Refusal = () =>
  new PolishError(
    'INVALID_INPUT',
    'version-2 ("goal slice") files are recognised but their rules are not implemented in polish yet',
    { field: 'schema_version' },
  );

/** `polish policy validate --policy P`: prints {valid, policy_id, policy_hash} or the problem. */
export function policyValidateCommand(flags: { policy?: string }): number {
  if (!flags.policy) throw invalidInput('policy', 'required: --policy file.json');
  try {
    const document = readJson(flags.policy);
    if (versionTwo(document)) throw v2Refusal();
    const policy = validatePolicy(document);
    const hash = policyHash(policy);
    process.stdout.write(`${JSON.stringify({ valid: true, policy_id: policy.policy_id, policy_hash: hash })}\n`);
    return 0;
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ valid: false, error: (error as Error).message })}\n`);
    return 2;
  }
}

/**
 * `polish policy evaluate --policy P --checkpoint C`: prints the PolicyDecision (policy-decision-1)
 * for harness-written files. Unreadable or invalid input fails closed (stop) and exits 2.
 */
export function policyEvaluateCommand(flags: { policy?: string; checkpoint?: string }): number {
  if (!flags.policy) throw invalidInput('policy', 'required: --policy file.json');
  if (!flags.checkpoint) throw invalidInput('checkpoint', 'required: --checkpoint file.json');
  const policyName = basename(flags.policy, extname(flags.policy));
  let policy: unknown;
  let checkpoint: unknown;
  let humanKeys: Record<string, string>;
  try {
    policy = readJson(flags.policy);
    checkpoint = readJson(flags.checkpoint);
    if (versionTwo(policy) || versionTwo(checkpoint)) throw v2Refusal();
    humanKeys = humanKeysFrom();
  } catch (error) {
    process.stdout.write(`${JSON.stringify(failClosed(policyName, (error as Error).message), null, 2)}\n`);
    return 2;
  }
  const decision = evaluatePolicy({ policy, checkpoint, policyName, humanKeys });
  process.stdout.write(`${JSON.stringify(decision, null, 2)}\n`);
  return decision.policy_hash === null ? 2 : POLICY_EXIT[decision.decision];
}

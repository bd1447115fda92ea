import { readFileSync } from 'node:fs';
import { basename, extname } from 'node:path';
import {
  canonicalJson,
  evaluatePolicy,
  failClosed,
  humanKeysFrom,
  validatePolicy,
  PolicyInputError,
} from '@polish/orchestrator';
import { createHash } from 'node:crypto';
import { InputError } from '../input-error.js';

/** Exit codes of `polish policy`: 0 continue (or valid), 2 invalid, 3 checkpoint, 4 stop. */
const EXIT_OF = { continue: 0, checkpoint: 3, stop: 4 } as const;

function readJson(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new PolicyInputError(`${basename(path)} is not JSON (${(error as Error).message})`);
  }
}

const versionTwo = (document: unknown) => (document as { schema_version?: unknown } | null)?.schema_version === 2;
const V2_REFUSAL = 'version-2 ("goal slice") files are recognised but their rules are not implemented in polish yet';

/** `polish policy validate --policy P`: prints {valid, policy_id, policy_hash} or the problem. */
export function policyValidateCommand(flags: { policy?: string }): number {
  if (!flags.policy) throw new InputError('policy', 'required: --policy file.json');
  try {
    const document = readJson(flags.policy);
    if (versionTwo(document)) throw new PolicyInputError(V2_REFUSAL);
    const policy = validatePolicy(document);
    const hash = createHash('sha256').update(canonicalJson(policy), 'utf8').digest('hex');
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
  if (!flags.policy) throw new InputError('policy', 'required: --policy file.json');
  if (!flags.checkpoint) throw new InputError('checkpoint', 'required: --checkpoint file.json');
  const policyName = basename(flags.policy, extname(flags.policy));
  let policy: unknown;
  let checkpoint: unknown;
  let humanKeys: Record<string, string>;
  try {
    policy = readJson(flags.policy);
    checkpoint = readJson(flags.checkpoint);
    if (versionTwo(policy) || versionTwo(checkpoint)) throw new PolicyInputError(V2_REFUSAL);
    humanKeys = humanKeysFrom();
  } catch (error) {
    process.stdout.write(`${JSON.stringify(failClosed(policyName, (error as Error).message), null, 2)}\n`);
    return 2;
  }
  const decision = evaluatePolicy({ policy, checkpoint, policyName, humanKeys });
  process.stdout.write(`${JSON.stringify(decision, null, 2)}\n`);
  return decision.policy_hash === null ? 2 : EXIT_OF[decision.decision];
}

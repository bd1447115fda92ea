import { invalidInput, type AnyPolicyDecision } from '@polish/protocol';
import { checkCheckpoint, evaluateV1, failClosed, isVersionTwo, validatePolicy } from './policy-engine.js';
import { evaluateGoal, validateGoalCheckpoint, validateGoalPolicy } from './goal-engine.js';

/**
 * Evaluates a policy and a checkpoint as the harness's `evaluate_policy` does: each document is
 * validated by its own version (checkpoint first), the versions must match, and version 2 is
 * weighed as a goal slice. Throws INVALID_INPUT naming the problem.
 */
export function evaluateDocuments(
  policy: unknown,
  checkpoint: unknown,
  secrets: Record<string, string>,
): AnyPolicyDecision {
  if (!isVersionTwo(policy) && !isVersionTwo(checkpoint)) return evaluateV1(policy, checkpoint, secrets);
  if (isVersionTwo(checkpoint)) validateGoalCheckpoint(checkpoint);
  else checkCheckpoint(checkpoint);
  if (isVersionTwo(policy)) validateGoalPolicy(policy);
  else validatePolicy(policy);
  if (isVersionTwo(policy) !== isVersionTwo(checkpoint))
    throw invalidInput('checkpoint', 'checkpoint and policy versions must match');
  return evaluateGoal(checkpoint, policy, secrets);
}

/**
 * The policy engine: validates the policy and checkpoint (with the human keys) and decides.
 * Never throws: invalid input fails closed (`stop`, no policy hash, reason `evaluation_error:…`).
 */
export function evaluatePolicy(input: {
  policy: unknown;
  checkpoint: unknown;
  policyName: string;
  humanKeys?: Record<string, string>;
}): AnyPolicyDecision {
  try {
    return evaluateDocuments(input.policy, input.checkpoint, input.humanKeys ?? {});
  } catch (error) {
    return failClosed(input.policyName, (error as Error).message);
  }
}

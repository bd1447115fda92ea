import { invalidInput, type GoalCheckpointInput, type GoalFailure } from '@polish/protocol';
import { documentHash } from './policy-engine.js';
import { failureId, validateGoalCheckpoint } from './goal-engine.js';

// Failure identity, as the harness's `record_failure` and `permit_corrected_attempt`
// (agent_collab_harness/goals.py, 0.5.1, commit 4f45b97): a failure is identified by what was
// done (operation, target), on which inputs (their hash) and how it failed (error class) —
// never by a model, session or slice name. The same failure again on the same inputs is a retry;
// a corrected attempt needs other inputs and new evidence; waiting on a service is not recorded.

const refused = (problem: string) => invalidInput('checkpoint', problem);
const SHA256 = /^[a-f0-9]{64}$/;

/** What failed, on what, and the evidence of it. */
export interface FailureInput {
  operation: string;
  target: string;
  inputSha256: string;
  errorClass: string;
  evidenceRef: string;
}

/** Records a failed action: a new record, or one more attempt of the same; `same_failure_retries` follows. */
export function recordFailure(raw: GoalCheckpointInput, failure: FailureInput): GoalCheckpointInput {
  const state = validateGoalCheckpoint(raw);
  for (const [name, value] of Object.entries(failure))
    if (!/\S/.test(value)) throw invalidInput(name, 'must not be blank');
  if (!SHA256.test(failure.inputSha256)) throw invalidInput('input_sha256', 'expected SHA-256');
  const identity = documentHash([failure.operation, failure.target]);
  const record = { identity, input_sha256: failure.inputSha256, error_class: failure.errorClass };
  const recordId = failureId(record);
  let match = state.failure_history.find((known) => failureId(known) === recordId);
  if (match) {
    match.attempts += 1;
    match.evidence_ref = failure.evidenceRef;
    match.observed_evidence = [...new Set([...match.observed_evidence, ...state.task.evidence_refs])].sort();
  } else {
    match = {
      ...record,
      attempts: 1,
      evidence_ref: failure.evidenceRef,
      observed_evidence: [...state.task.evidence_refs],
    };
    state.failure_history.push(match);
  }
  const prior =
    state.active_failure === null || state.active_failure === recordId ? state.task.same_failure_retries : 0;
  state.task.same_failure_retries = Math.max(prior, match.attempts - 1);
  state.active_failure = recordId;
  return validateGoalCheckpoint(state);
}

/**
 * Permits one corrected attempt on other inputs, keeping every failure recorded: the evidence of
 * the correction must be new (in the task's evidence, neither accepted nor seen by a failure).
 * Returning to inputs that failed before restores their attempt count.
 */
export function permitCorrectedAttempt(
  raw: GoalCheckpointInput,
  correction: { inputSha256: string; evidenceRef: string },
): GoalCheckpointInput {
  const state = validateGoalCheckpoint(raw);
  if (!SHA256.test(correction.inputSha256)) throw invalidInput('input_sha256', 'expected SHA-256');
  const { evidenceRef } = correction;
  if (!evidenceRef || !state.task.evidence_refs.includes(evidenceRef) || state.accepted_evidence.includes(evidenceRef))
    throw refused('corrected attempt requires new evidence');
  if (state.active_failure === null) throw refused('unclassified legacy failure requires diagnosis before retry');
  const failure = state.failure_history.find((known) => failureId(known) === state.active_failure) as GoalFailure;
  if (correction.inputSha256 === failure.input_sha256)
    throw refused('renaming or switching models does not change failure inputs');
  const consumed = new Set(state.failure_history.flatMap((known) => [...known.observed_evidence, known.evidence_ref]));
  if (consumed.has(evidenceRef)) throw refused('correction evidence predates failure or was already consumed');
  failure.observed_evidence.push(evidenceRef);
  const revision = {
    identity: failure.identity,
    input_sha256: correction.inputSha256,
    error_class: failure.error_class,
  };
  const match = state.failure_history.find((known) => failureId(known) === failureId(revision));
  state.active_failure = failureId(revision);
  if (match) state.task.same_failure_retries = Math.max(0, match.attempts - 1);
  else {
    state.failure_history.push({ ...failure, ...revision, attempts: 0, evidence_ref: evidenceRef });
    state.task.same_failure_retries = 0;
  }
  return validateGoalCheckpoint(state);
}

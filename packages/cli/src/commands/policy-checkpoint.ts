import { readFileSync } from 'node:fs';
import {
  advanceGoalFile,
  checkCheckpoint,
  createGoalFile,
  humanKeysFrom,
  isVersionTwo,
  migrateGoal,
  validateGoalCheckpoint,
  validateGoalPolicy,
  validatePolicy,
} from '@polish/orchestrator';
import { invalidInput } from '@polish/protocol';
import { EXIT } from '../exit-codes.js';
import { emit, invalidDocument, parseDocument, readArgument } from './policy.js';

// `polish policy checkpoint validate|advance|migrate` and `polish policy doctor`: the harness's
// `agent-collab checkpoint …` and `agent-collab doctor`, with its flags, outputs and exit codes
// (0 done, 2 invalid or refused; nothing is written on a refusal).

const required = (value: string | undefined, flag: string): string => {
  if (!value) throw invalidInput(flag, `required: --${flag}`);
  return value;
};

/** `checkpoint validate --checkpoint C`: the task id, or why the checkpoint (v1 or v2) is invalid. */
export function checkpointValidateCommand(flags: { checkpoint?: string }): number {
  const path = required(flags.checkpoint, 'checkpoint');
  try {
    const document = parseDocument(readArgument(path), path);
    const checkpoint = isVersionTwo(document) ? validateGoalCheckpoint(document) : checkCheckpoint(document);
    emit({ schema_version: 1, ok: true, kind: 'checkpoint', path, task_id: checkpoint.task_id, errors: [] });
    return EXIT.CONVERGED;
  } catch (error) {
    emit(invalidDocument('checkpoint', path, error));
    return EXIT.INVALID_INPUT;
  }
}

/** What `advance` and `migrate` print when they succeed. */
const transitioned = (state: ReturnType<typeof validateGoalCheckpoint>) => ({
  schema_version: 2,
  ok: true,
  task_id: state.task_id,
  slice_id: state.slice_id,
  totals: state.totals,
});

/**
 * `checkpoint advance --checkpoint C --policy P --request-id ID --expected-sha256 H`: advances an
 * eligible slice in place, once per request id; a file whose hash is not H is left as it is.
 */
export function checkpointAdvanceCommand(flags: {
  checkpoint?: string;
  policy?: string;
  requestId?: string;
  expectedSha256?: string;
}): number {
  const path = required(flags.checkpoint, 'checkpoint');
  const policyPath = required(flags.policy, 'policy');
  const requestId = required(flags.requestId, 'request-id');
  const expected = required(flags.expectedSha256, 'expected-sha256');
  try {
    const policy = parseDocument(readArgument(policyPath), policyPath);
    emit(transitioned(advanceGoalFile(path, policy, requestId, expected, humanKeysFrom())));
    return EXIT.CONVERGED;
  } catch (error) {
    emit(invalidDocument('checkpoint', path, error));
    return EXIT.INVALID_INPUT;
  }
}

/**
 * `checkpoint migrate --checkpoint OLD --policy P --metadata M --output NEW`: a v2 copy of a v1
 * checkpoint at a new path (never over an existing file); the old file is not touched. M is a
 * JSON object with exactly `goal_id` and `next_step`.
 */
export function checkpointMigrateCommand(flags: {
  checkpoint?: string;
  policy?: string;
  metadata?: string;
  output?: string;
}): number {
  const path = required(flags.checkpoint, 'checkpoint');
  const policyPath = required(flags.policy, 'policy');
  const metadataPath = required(flags.metadata, 'metadata');
  const output = required(flags.output, 'output');
  try {
    const policy = parseDocument(readArgument(policyPath), policyPath);
    const metadata = parseDocument(readArgument(metadataPath), metadataPath);
    const keys = Object.keys(metadata).sort();
    if (
      JSON.stringify(keys) !== '["goal_id","next_step"]' ||
      typeof metadata.goal_id !== 'string' ||
      typeof metadata.next_step !== 'string'
    )
      throw new Error('migration metadata requires goal_id and next_step only');
    const state = migrateGoal(
      parseDocument(readArgument(path), path),
      policy,
      { goalId: metadata.goal_id, nextStep: metadata.next_step },
      humanKeysFrom(),
    );
    emit(transitioned(createGoalFile(output, state)));
    return EXIT.CONVERGED;
  } catch (error) {
    emit(invalidDocument('checkpoint', path, error));
    return EXIT.INVALID_INPUT;
  }
}

const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/**
 * `policy doctor`: read-only health of the configuration: the policy `AGENT_COLLAB_POLICY` names
 * (when set) and the human keys of `AGENT_COLLAB_HUMAN_KEYS_JSON` (never shown). Exit 0 ok, 2 misconfigured.
 */
export function doctorCommand(): number {
  const checks: { check: string; status: 'OK' | 'FAIL' | 'SKIP'; detail: string }[] = [];
  const configured = process.env.AGENT_COLLAB_POLICY;
  if (!configured)
    checks.push({ check: 'configured_policy', status: 'SKIP', detail: 'AGENT_COLLAB_POLICY is not set' });
  else
    try {
      const document = parseDocument(readArgument(configured), configured);
      const policyId = (isVersionTwo(document) ? validateGoalPolicy(document) : validatePolicy(document)).policy_id;
      checks.push({ check: 'configured_policy', status: 'OK', detail: `${policyId} (${configured})` });
    } catch (error) {
      checks.push({ check: 'configured_policy', status: 'FAIL', detail: (error as Error).message });
    }
  if (process.env.AGENT_COLLAB_HUMAN_KEYS_JSON === undefined)
    checks.push({
      check: 'human_authorization_keys',
      status: 'SKIP',
      detail: 'AGENT_COLLAB_HUMAN_KEYS_JSON is not set',
    });
  else
    try {
      const count = Object.keys(humanKeysFrom()).length;
      checks.push({
        check: 'human_authorization_keys',
        status: 'OK',
        detail: `${count} key id(s) configured; secrets not displayed`,
      });
    } catch (error) {
      checks.push({ check: 'human_authorization_keys', status: 'FAIL', detail: (error as Error).message });
    }
  const failed = checks.some((check) => check.status === 'FAIL');
  emit({
    schema_version: 1,
    status: failed ? 'misconfigured' : 'ok',
    package: 'polish',
    version: VERSION,
    node: process.versions.node,
    checks,
  });
  return failed ? EXIT.INVALID_INPUT : EXIT.CONVERGED;
}

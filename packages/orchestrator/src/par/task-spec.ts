import {
  invalidInput,
  type ParCheckpoint,
  type ParFiles,
  type ParPolicy,
  type ParTaskFile,
  type SpecAuthorization,
} from '@polish/protocol';
import { canonicalJson } from './canonical-json.js';
import { sha256 } from '../hash.js';
import { signHumanRecord, usableKeys, verifyHumanRecord } from './human-records.js';

// What a human gate is bound to. The task spec (goal, criteria and which of them are human gates,
// critique source, policy and checkpoint files) is hashed when the task is created and, under a
// policy that pins human keys, signed then; a human decision signs the pending action: the task
// id, topic, cycle, spec, gate criteria and the hash of every file it approves. Resuming checks
// all of it against the workspace, whatever the checkpoint's status says.

/** The parts of a task file that say what the task is (not what happened to it). */
export const taskSpec = (task: ParTaskFile) => ({
  topic: task.topic,
  goal: task.goal,
  policy_ref: task.policy_ref,
  checkpoint_ref: task.checkpoint_ref,
  acceptance_criteria: task.acceptance_criteria,
  critique_source: task.critique_source,
});

/** SHA-256 of the task spec's canonical JSON. */
export const specHash = (task: ParTaskFile) => sha256(canonicalJson(taskSpec(task)));

/** The human gates of a task: the criteria only a signed human decision can pass. */
export const gateCriteria = (task: ParTaskFile) =>
  task.acceptance_criteria
    .filter((criterion) => criterion.human_gate)
    .map((criterion) => ({ id: criterion.id, text: criterion.text }));

/** The action a human decision is about: this task and topic, at this cycle, under this spec, with these files. */
export function pendingActionHash(task: ParTaskFile, checkpoint: ParCheckpoint, artifact: ParFiles): string {
  return sha256(
    canonicalJson({
      task_id: checkpoint.task_id,
      topic: task.topic,
      cycle: checkpoint.cycle,
      spec_sha256: specHash(task),
      gates: gateCriteria(task),
      files: Object.fromEntries(Object.entries(artifact).map(([path, content]) => [path, sha256(content)])),
    }),
  );
}

/**
 * The signature of a new task's spec. Under a policy that pins human keys the spec is signed with
 * one of them (`keyId`, else the first usable one), so that no one without a key can take a gate
 * out later; a task with human gates needs such a policy, since no one else could ever approve them.
 */
export function signTaskSpec(
  task: ParTaskFile,
  policy: ParPolicy,
  secrets: Record<string, string>,
  options: { keyId?: string; now: Date },
): SpecAuthorization | null {
  const pinned = Object.keys(policy.human_authorization.key_hashes);
  if (pinned.length === 0) {
    if (gateCriteria(task).length > 0)
      throw invalidInput(
        'human-gate',
        'the policy pins no human key (human_authorization.key_hashes), so no one could ever approve a gate',
      );
    return null;
  }
  const usable = usableKeys(policy, secrets);
  const keyId = options.keyId ?? usable[0];
  if (!keyId || !usable.includes(keyId))
    throw invalidInput(
      'AGENT_COLLAB_HUMAN_KEYS_JSON',
      `the policy pins human keys (${pinned.join(', ')}): the task spec is signed when the task is created, so give the secret of ${options.keyId ?? 'one of them'}`,
    );
  return signHumanRecord(
    { spec_sha256: specHash(task), actor: `human:${keyId}`, timestamp: options.now.toISOString() },
    keyId,
    secrets[keyId] as string,
  );
}

/**
 * Checks that the task file still says what was created: its spec hashes as recorded, and under
 * a policy that pins human keys, a key of the policy signed that hash. Throws INVALID_INPUT.
 */
export function checkTaskSpec(task: ParTaskFile, policy: ParPolicy, secrets: Record<string, string>): void {
  const hash = specHash(task);
  if (!task.spec_sha256)
    throw invalidInput('task file', 'it has no spec_sha256: start the task with `polish par run` to anchor its spec');
  if (task.spec_sha256 !== hash)
    throw invalidInput(
      'task file',
      'its spec (goal, criteria, human gates, critique, files) changed since it was created',
    );
  const signed = task.spec_authorization;
  if (Object.keys(policy.human_authorization.key_hashes).length > 0 && !signed)
    throw invalidInput('task file', 'the policy pins human keys but the task spec is not signed');
  if (signed) {
    if (signed.spec_sha256 !== hash) throw invalidInput('task file', 'the signed spec is not this spec');
    verifyHumanRecord(signed, policy, secrets, 'task file: spec_authorization');
  }
}

import { existsSync } from 'node:fs';
import { basename, extname } from 'node:path';
import {
  ParTaskFileSchema,
  firstIssue,
  invalidInput,
  type HumanDecision,
  type ParCheckpoint,
  type ParPolicy,
  type ParTaskFile,
  type ParTaskFileInput,
  type PolicyDecision,
} from '@polish/protocol';
import { failClosed, isVersionTwo, validateCheckpoint } from './policy-engine.js';
import { parseStrictJson } from './strict-json.js';
import { trustPolicy } from './goal-engine.js';
import { newGoal } from './goal-slices.js';
import { checkHumanKey, signHumanRecord } from './human-records.js';
import {
  coordPaths,
  readJsonFile,
  readTaskFile,
  readText,
  readWorkspace,
  resolveRef,
  writeTaskFile,
} from './coord-files.js';
import { checkTaskSpec, pendingActionHash, signTaskSpec, specHash } from './task-spec.js';
import { documentOf, parStateOf } from './par-state.js';
import { writeFileAtomic } from '../write-file-atomic.js';

/** A task refused before it starts because its policy is invalid: the policy engine's `stop`, nothing written. */
export class PolicyFailedClosed extends Error {
  constructor(readonly decision: PolicyDecision) {
    super(decision.reasons.join('; '));
  }
}

/** The default checkpoint file of a workspace (agent-collab-harness layout). */
export const DEFAULT_CHECKPOINT_REF = '.coord/task-checkpoint.json';

/** A fresh task-checkpoint-1 for a task that has not run yet. */
export function freshCheckpoint(taskId: string, now: Date): ParCheckpoint {
  return {
    schema_version: 1,
    task_id: taskId,
    parent_id: null,
    status: 'running',
    cycle: 0,
    tool_calls: 0,
    elapsed_seconds: 0,
    transcript_bytes: 0,
    same_failure_retries: 0,
    no_evidence_cycles: 0,
    active_children: 0,
    children_spawned: 0,
    last_checkpoint_transcript_bytes: 0,
    task_packet_tokens: 0,
    parent_summary_tokens: 0,
    memory_digest_tokens: 0,
    child_result_words: 0,
    pending_action_hash: null,
    evidence_refs: [],
    decisions: [],
    overrides: [],
    stop_reason: null,
    updated_at: now.toISOString(),
  };
}

const issueOf = (error: Parameters<typeof firstIssue>[0]) => {
  const issue = firstIssue(error);
  return `${issue.path}: ${issue.message}`;
};

/** The checkpoint a new task starts from: task-checkpoint-1, or a goal (task-checkpoint-2) under a v2 policy. */
function freshDocument(task: ParTaskFile, topic: string, now: Date, goal: boolean): unknown {
  const fresh = freshCheckpoint(topic, now);
  return goal ? newGoal(fresh, { goalId: topic, nextStep: task.goal, usageKnown: true }) : fresh;
}

/**
 * Starts a PAR task in a workspace: writes `.coord/par_<topic>.yml` with its spec anchored
 * (hashed, and signed with a key of the policy when it pins any) and, unless it exists, a fresh
 * checkpoint (v2 under a v2 policy). Everything is checked before anything is written. A topic
 * that already has cycles is refused (resume it instead); a task file written by hand with no
 * cycles is kept.
 */
export function createParTask(
  workspace: string,
  input: ParTaskFileInput | null,
  topic: string,
  now: Date,
  signing: { secrets?: Record<string, string>; keyId?: string } = {},
): ParTaskFile {
  const paths = coordPaths(workspace, topic);
  let task: ParTaskFile;
  if (existsSync(paths.task)) {
    task = readTaskFile(paths.task);
    if (task.cycles.length > 0 || task.final_status !== null) {
      throw invalidInput(
        'topic',
        `${topic} has already run (${paths.task}); continue it with \`polish par resume --topic ${topic}\``,
      );
    }
  } else {
    if (!input)
      throw invalidInput(
        'topic',
        `${topic}: no task file at ${paths.task}; pass --goal, --acceptance, --critique and --policy`,
      );
    const parsed = ParTaskFileSchema.safeParse(input);
    if (!parsed.success) throw invalidInput('task', issueOf(parsed.error));
    task = parsed.data;
  }
  const policyPath = resolveRef(workspace, task.policy_ref);
  const policyName = basename(policyPath, extname(policyPath));
  // A policy that cannot be read is a command that cannot run; one that is invalid fails closed.
  const policyText = readText(policyPath, 'policy');
  let policyDocument: unknown;
  let policy: ParPolicy;
  try {
    policyDocument = parseStrictJson(policyText);
    policy = trustPolicy(policyDocument);
  } catch (error) {
    throw new PolicyFailedClosed(failClosed(policyName, (error as Error).message));
  }
  const unsigned = { ...task, spec_sha256: specHash(task), spec_authorization: null };
  const signed = {
    ...unsigned,
    spec_authorization: signTaskSpec(unsigned, policy, signing.secrets ?? {}, { ...signing, now }),
  };
  const checkpointPath = resolveRef(workspace, task.checkpoint_ref);
  if (existsSync(checkpointPath)) {
    const existing = readJsonFile(checkpointPath, 'checkpoint') as {
      task_id?: unknown;
      slice_id?: unknown;
      task?: { cycle?: unknown };
    };
    const cycle = isVersionTwo(existing) ? existing.task?.cycle : (existing as { cycle?: unknown }).cycle;
    if (existing.task_id !== topic || cycle !== 0 || isVersionTwo(existing) !== isVersionTwo(policyDocument)) {
      throw invalidInput(
        'checkpoint',
        `${checkpointPath} belongs to task ${String(existing.task_id)} (cycle ${String(cycle)}, version ${isVersionTwo(existing) ? 2 : 1}); pass --checkpoint for another file`,
      );
    }
  }
  writeTaskFile(paths.task, signed);
  if (!existsSync(checkpointPath))
    writeFileAtomic(
      checkpointPath,
      `${JSON.stringify(freshDocument(signed, topic, now, isVersionTwo(policyDocument)), null, 2)}\n`,
    );
  return signed;
}

/** A human's decision on a gate, as `polish par decide` takes it. */
export interface HumanDecisionInput {
  gate: string;
  decision: HumanDecision['decision'];
  keyId: string;
  rationale: string;
}

/**
 * Records a signed human decision on a gate in the task's checkpoint (HMAC-SHA256 with the
 * key's secret, as agent-collab-harness v1 signs it). The gate must be one of the task's signed
 * human gates, the run must be waiting on a pending action, that action must still be the task,
 * cycle and files on disk, and the key must match the policy's key hash; the new checkpoint is
 * validated whole before it replaces the old one.
 */
export function recordHumanDecision(
  workspace: string,
  topic: string,
  input: HumanDecisionInput,
  secrets: Record<string, string>,
  now: Date,
): HumanDecision {
  const paths = coordPaths(workspace, topic);
  const task = readTaskFile(paths.task);
  const gate = task.acceptance_criteria.find((criterion) => criterion.id === input.gate);
  if (!gate?.human_gate) {
    const gates = task.acceptance_criteria.filter((criterion) => criterion.human_gate).map((criterion) => criterion.id);
    throw invalidInput(
      'gate',
      `${input.gate} is not a human gate of topic ${topic} (its gates: ${gates.join(', ') || 'none'})`,
    );
  }
  const policy = trustPolicy(readJsonFile(resolveRef(workspace, task.policy_ref), 'policy'));
  checkTaskSpec(task, policy, secrets);
  const checkpointPath = resolveRef(workspace, task.checkpoint_ref);
  const state = parStateOf(readJsonFile(checkpointPath, 'checkpoint'));
  const checkpoint = validateCheckpoint(state.checkpoint, policy, secrets);
  if (checkpoint.status !== 'waiting_for_human' || !checkpoint.pending_action_hash) {
    throw invalidInput(
      'topic',
      `${topic} is not waiting for a human decision (status ${checkpoint.status}); a gate is decided when the run asks for it`,
    );
  }
  // The decision is about the action the run asked about: this task, cycle and files, still on disk.
  if (pendingActionHash(task, checkpoint, readWorkspace(workspace)) !== checkpoint.pending_action_hash) {
    throw invalidInput(
      'workspace',
      `it changed since topic ${topic} asked for a decision; resume it so it can ask about the current files`,
    );
  }
  const secret = checkHumanKey(policy, secrets, input.keyId, 'key');
  const decision = signHumanRecord(
    {
      gate: input.gate,
      actor: `human:${input.keyId}`,
      decision: input.decision,
      timestamp: now.toISOString(),
      rationale: input.rationale,
      affected_action_hash: checkpoint.pending_action_hash,
    },
    input.keyId,
    secret,
  );
  const updated = validateCheckpoint(
    { ...checkpoint, decisions: [...checkpoint.decisions, decision], updated_at: now.toISOString() },
    policy,
    secrets,
  );
  writeFileAtomic(
    checkpointPath,
    `${JSON.stringify(documentOf({ checkpoint: updated, goal: state.goal }), null, 2)}\n`,
  );
  return decision;
}

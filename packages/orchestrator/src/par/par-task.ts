import { existsSync } from 'node:fs';
import { basename, extname } from 'node:path';
import {
  ParTaskFileSchema,
  firstIssue,
  invalidInput,
  isInvalidInput,
  type HumanDecision,
  type ParCheckpoint,
  type ParTaskFile,
  type ParTaskFileInput,
} from '@polish/protocol';
import { checkHumanKey, signHumanRecord, validateCheckpoint, validatePolicy } from './policy-engine.js';
import { coordPaths, readJsonFile, readTaskFile, readWorkspace, resolveRef, writeTaskFile } from './coord-files.js';
import { pendingActionHash } from './par-machine.js';
import { writeFileAtomic } from '../write-file-atomic.js';

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

/**
 * Starts a PAR task in a workspace: writes `.coord/par_<topic>.yml` and, unless it exists, a
 * fresh checkpoint. Everything is checked before anything is written. A topic that already has
 * cycles is refused (resume it instead); a task file written by hand with no cycles is kept.
 */
export function createParTask(
  workspace: string,
  input: ParTaskFileInput | null,
  topic: string,
  now: Date,
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
  try {
    validatePolicy(readJsonFile(policyPath, 'policy'));
  } catch (error) {
    if (!isInvalidInput(error)) throw error;
    throw invalidInput(`policy ${basename(policyPath, extname(policyPath))}`, error.message, { cause: error });
  }
  const checkpointPath = resolveRef(workspace, task.checkpoint_ref);
  if (existsSync(checkpointPath)) {
    const existing = readJsonFile(checkpointPath, 'checkpoint') as { task_id?: unknown; cycle?: unknown };
    if (existing.task_id !== topic || existing.cycle !== 0) {
      throw invalidInput(
        'checkpoint',
        `${checkpointPath} belongs to task ${String(existing.task_id)} (cycle ${String(existing.cycle)}); pass --checkpoint for another file`,
      );
    }
  }
  writeTaskFile(paths.task, task);
  if (!existsSync(checkpointPath))
    writeFileAtomic(checkpointPath, `${JSON.stringify(freshCheckpoint(topic, now), null, 2)}\n`);
  return task;
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
 * key's secret, as agent-collab-harness v1 signs it). The gate must be one of the task's human
 * gates, the run must be waiting on a pending action, and the key must match the policy's key
 * hash; the new checkpoint is validated whole before it replaces the old one.
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
  const policy = validatePolicy(readJsonFile(resolveRef(workspace, task.policy_ref), 'policy'));
  const checkpointPath = resolveRef(workspace, task.checkpoint_ref);
  const checkpoint = validateCheckpoint(readJsonFile(checkpointPath, 'checkpoint'), policy, secrets);
  if (checkpoint.status !== 'waiting_for_human' || !checkpoint.pending_action_hash) {
    throw invalidInput(
      'topic',
      `${topic} is not waiting for a human decision (status ${checkpoint.status}); a gate is decided when the run asks for it`,
    );
  }
  // The decision is about the artifact the run asked about, so it must still be the one on disk.
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
  writeFileAtomic(checkpointPath, `${JSON.stringify(updated, null, 2)}\n`);
  return decision;
}

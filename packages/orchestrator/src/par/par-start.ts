import { existsSync } from 'node:fs';
import { basename, extname } from 'node:path';
import {
  invalidInput,
  isInvalidInput,
  type AnyPolicyDecision,
  type ParFiles,
  type ParLesson,
  type ParTaskFile,
} from '@polish/protocol';
import { coordPaths, readJsonFile, readTaskFile, readWorkspace, resolveRef } from './coord-files.js';
import { evaluatePolicy } from './evaluate-policy.js';
import { failClosed } from './policy-engine.js';
import { trustPolicy } from './goal-engine.js';
import { checkTaskSpec, pendingActionHash } from './task-spec.js';
import { parStateOf, type ParState } from './par-state.js';
import { approvedLessons } from '../memory/approved-lessons.js';

// What a PAR run (or resume) checks before its first cycle, whatever the checkpoint says: the
// policy and checkpoint (fail closed), the task spec against its anchor and signature, and every
// signed decision against the task, cycle and files they approved. Then the checkpoint is
// prepared to go on: gates all decided, a limit raised by an override, a service waited for.

/** The task's files, loaded. Throws INVALID_INPUT naming what is wrong. */
export function loadTask(workspace: string, topic: string) {
  const paths = coordPaths(workspace, topic);
  if (!existsSync(paths.task))
    throw invalidInput('topic', `${topic}: ${paths.task} does not exist (start it with \`polish par run\`)`);
  const task = readTaskFile(paths.task);
  if (task.topic !== topic) throw invalidInput('task file', `${paths.task} is for topic ${task.topic}, not ${topic}`);
  const policyPath = resolveRef(workspace, task.policy_ref);
  const checkpointPath = resolveRef(workspace, task.checkpoint_ref);
  return {
    paths: { ...paths, checkpoint: checkpointPath },
    task,
    policyName: basename(policyPath, extname(policyPath)),
    policy: readJsonFile(policyPath, 'policy'),
    checkpoint: readJsonFile(checkpointPath, 'checkpoint'),
  };
}

/** A run ready to go on, or the decision that stops it before anything is written. */
export type PreparedRun =
  | { ready: true; state: ParState; artifact: ParFiles; lessons: ParLesson[]; first: AnyPolicyDecision; note?: string }
  | { ready: false; decision: AnyPolicyDecision; reason: string };

/** Checks a loaded task and prepares its checkpoint to go on (see the module comment). */
export function prepareRun(
  workspace: string,
  loaded: ReturnType<typeof loadTask>,
  humanKeys: Record<string, string>,
): PreparedRun {
  const { task, policyName } = loaded;
  const first = evaluatePolicy({ policy: loaded.policy, checkpoint: loaded.checkpoint, policyName, humanKeys });
  if (first.policy_hash === null) return { ready: false, decision: first, reason: first.reasons.join('; ') };
  const refuse = (problem: string) => {
    const decision = failClosed(policyName, problem);
    return { ready: false as const, decision, reason: decision.reasons.join('; ') };
  };
  const policy = trustPolicy(loaded.policy);
  try {
    checkTaskSpec(task, policy, humanKeys);
  } catch (error) {
    if (!isInvalidInput(error)) throw error;
    return refuse(error.message);
  }
  let { checkpoint, goal } = parStateOf(loaded.checkpoint);
  const artifact = readWorkspace(workspace);
  // Signed decisions approve one action: this task and topic, at this cycle, under this spec, with these files.
  if (
    checkpoint.decisions.length > 0 &&
    checkpoint.pending_action_hash !== pendingActionHash(task, checkpoint, artifact)
  )
    return refuse(
      'checkpoint: the signed human decisions are about another action: the task, topic, cycle, gates or files changed since they were signed',
    );
  if (checkpoint.status === 'waiting_for_human' && undecidedGates(task, checkpoint.decisions).length === 0) {
    checkpoint = { ...checkpoint, status: 'running' };
    if (goal) goal = { ...goal, requires_human: false };
  }
  // A run stopped at a limit is weighed again: a signed override may have raised it since.
  if (checkpoint.status === 'budget_exhausted') checkpoint = { ...checkpoint, status: 'running', stop_reason: null };
  // A goal that waited on a service (an infrastructure error) tries the action again: waiting is not a failed retry.
  if (goal?.action_kind === 'wait' && checkpoint.status === 'error') {
    checkpoint = { ...checkpoint, status: 'running', stop_reason: null };
    goal = { ...goal, action_kind: 'execute' };
  }
  const memory = approvedLessons(loaded.paths.coord, task.topic, policy, humanKeys);
  return {
    ready: true,
    state: { checkpoint, goal },
    artifact,
    lessons: memory.lessons,
    first,
    ...(memory.problem ? { note: `memory: no lessons used: ${memory.problem}` } : {}),
  };
}

const undecidedGates = (task: ParTaskFile, decisions: readonly { gate: string }[]) =>
  task.acceptance_criteria.filter(
    (criterion) => criterion.human_gate && !decisions.some((record) => record.gate === criterion.id),
  );

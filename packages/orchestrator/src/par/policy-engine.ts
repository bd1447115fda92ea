import { createHmac, timingSafeEqual } from 'node:crypto';
import type { z } from 'zod';
import {
  LIMIT_NAMES,
  firstIssue,
  invalidInput,
  ParCheckpointSchema,
  ParPolicySchema,
  type LimitName,
  type ParCheckpoint,
  type ParPolicy,
  type PolicyDecision,
} from '@polish/protocol';
import { canonicalJson } from './canonical-json.js';
import { sha256 } from '../hash.js';

/** The metrics a checkpoint reports, and the limit each is held against. */
const REACHED: readonly [keyof ParCheckpoint, LimitName][] = [
  ['cycle', 'max_cycles'],
  ['tool_calls', 'max_tool_calls'],
  ['elapsed_seconds', 'max_elapsed_seconds'],
  ['transcript_bytes', 'max_transcript_bytes'],
  ['same_failure_retries', 'max_same_failure_retries'],
  ['no_evidence_cycles', 'max_no_evidence_cycles'],
  ['task_packet_tokens', 'max_task_packet_tokens'],
  ['parent_summary_tokens', 'max_parent_summary_tokens'],
  ['memory_digest_tokens', 'max_memory_digest_tokens'],
  ['child_result_words', 'max_child_result_words'],
];
const EXCEEDED: readonly [keyof ParCheckpoint, LimitName][] = [
  ['children_spawned', 'max_children_per_parent'],
  ['active_children', 'max_concurrency'],
];
/** The metric each limit is compared with (for overrides). */
const METRIC_OF: Partial<Record<LimitName, keyof ParCheckpoint>> = {
  ...Object.fromEntries([...REACHED, ...EXCEEDED].map(([metric, limit]) => [limit, metric])),
  checkpoint_transcript_bytes: 'transcript_bytes',
};
const OBSERVED = [
  ...REACHED.map(([metric]) => metric),
  ...EXCEEDED.map(([metric]) => metric),
  'last_checkpoint_transcript_bytes',
] as const;

/** A file that does not parse: the field is the file, the problem its first issue. */
const issueError = (what: string, error: z.ZodError) => {
  const issue = firstIssue(error);
  return invalidInput(what, `${issue.path}: ${issue.message}`);
};

/** Parses and checks a policy: the schema, plus the rules JSON Schema cannot express. */
export function validatePolicy(raw: unknown): ParPolicy {
  const parsed = ParPolicySchema.safeParse(raw);
  if (!parsed.success) throw issueError('policy', parsed.error);
  const { limits } = parsed.data;
  if (limits.max_transcript_bytes < limits.checkpoint_transcript_bytes) {
    throw invalidInput('policy', 'limits.max_transcript_bytes must be at least limits.checkpoint_transcript_bytes');
  }
  if (limits.max_concurrency > limits.max_children_per_parent) {
    throw invalidInput('policy', 'limits.max_concurrency must be at most limits.max_children_per_parent');
  }
  return parsed.data;
}

/** Signs a human record: HMAC-SHA256 with the key's secret over the record's canonical JSON (without `authorization`). */
export function signHumanRecord<T extends { actor: string }>(
  unsigned: T,
  keyId: string,
  secret: string,
): T & { authorization: { scheme: 'hmac-sha256'; key_id: string; signature: string } } {
  const signature = createHmac('sha256', secret).update(canonicalJson(unsigned), 'utf8').digest('hex');
  return { ...unsigned, authorization: { scheme: 'hmac-sha256', key_id: keyId, signature } };
}

/** Checks that a key id may sign under the policy: the policy knows it and the secret hashes to its key hash. */
export function checkHumanKey(
  policy: ParPolicy,
  secrets: Record<string, string>,
  keyId: string,
  where: string,
): string {
  const expectedHash = policy.human_authorization.key_hashes[keyId];
  if (!expectedHash) throw invalidInput(where, `key ${keyId} is not in the policy's key_hashes`);
  const secret = secrets[keyId];
  if (secret === undefined) throw invalidInput(where, `no secret for key ${keyId} in AGENT_COLLAB_HUMAN_KEYS_JSON`);
  if (sha256(secret) !== expectedHash)
    throw invalidInput(where, `the secret of key ${keyId} does not match the policy's key hash`);
  return secret;
}

/** Checks one human record: its key is the policy's, its secret hashes right, its signature is the secret's. */
export function verifyHumanRecord(
  record: { actor: string; authorization: { key_id: string; signature: string } },
  policy: ParPolicy,
  secrets: Record<string, string>,
  where: string,
) {
  const keyId = record.actor.slice('human:'.length);
  if (record.authorization.key_id !== keyId) throw invalidInput(where, `authorization.key_id is not the actor's key`);
  const secret = checkHumanKey(policy, secrets, keyId, where);
  const { authorization: _authorization, ...unsigned } = record;
  const signature = createHmac('sha256', secret).update(canonicalJson(unsigned), 'utf8').digest();
  const given = Buffer.from(record.authorization.signature, 'hex');
  if (given.length !== signature.length || !timingSafeEqual(given, signature))
    throw invalidInput(where, `bad signature`);
}

/** Parses and checks a checkpoint against its policy (signatures, action hashes, overrides). */
export function validateCheckpoint(raw: unknown, policy: ParPolicy, secrets: Record<string, string>): ParCheckpoint {
  const parsed = ParCheckpointSchema.safeParse(raw);
  if (!parsed.success) throw issueError('checkpoint', parsed.error);
  const checkpoint = parsed.data;
  const records = [...checkpoint.decisions, ...checkpoint.overrides];
  if (records.length > 0) {
    if (!checkpoint.pending_action_hash)
      throw invalidInput('checkpoint', 'pending_action_hash is required when decisions or overrides exist');
    for (const record of records) {
      if (record.affected_action_hash !== checkpoint.pending_action_hash) {
        throw invalidInput('checkpoint', 'a record does not concern the pending action (affected_action_hash)');
      }
    }
  }
  checkpoint.decisions.forEach((decision, index) =>
    verifyHumanRecord(decision, policy, secrets, `checkpoint: decisions.${index}`),
  );
  const overridden = new Set<string>();
  checkpoint.overrides.forEach((override, index) => {
    const where = `checkpoint: overrides.${index}`;
    if (overridden.has(override.limit)) throw invalidInput(where, `a second override of ${override.limit}`);
    overridden.add(override.limit);
    verifyHumanRecord(override, policy, secrets, where);
    const limit = policy.limits[override.limit];
    const metric = METRIC_OF[override.limit];
    const current = metric ? Number(checkpoint[metric]) : Infinity;
    if (!(override.observed_value < limit))
      throw invalidInput(where, `observed_value must be below the policy's ${override.limit} (${limit})`);
    if (!(override.observed_value <= current))
      throw invalidInput(where, `observed_value must not exceed the current ${metric}`);
    if (!(override.value >= limit)) throw invalidInput(where, `an override only raises a limit (value ≥ ${limit})`);
  });
  const latest = new Map<string, string>();
  for (const decision of checkpoint.decisions) {
    const key = `${decision.gate}\u0000${Date.parse(decision.timestamp)}`;
    if (latest.has(key)) throw invalidInput('checkpoint', `two decisions of gate ${decision.gate} at the same time`);
    latest.set(key, decision.decision);
  }
  return checkpoint;
}

/** Reads AGENT_COLLAB_HUMAN_KEYS_JSON (a JSON object: key id → secret). */
export function humanKeysFrom(environment: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const raw = environment.AGENT_COLLAB_HUMAN_KEYS_JSON;
  if (!raw) return {};
  let keys: unknown;
  try {
    keys = JSON.parse(raw);
  } catch {
    throw invalidInput('AGENT_COLLAB_HUMAN_KEYS_JSON', 'is not JSON');
  }
  if (
    !keys ||
    typeof keys !== 'object' ||
    Array.isArray(keys) ||
    Object.values(keys).some((value) => typeof value !== 'string')
  ) {
    throw invalidInput('AGENT_COLLAB_HUMAN_KEYS_JSON', 'must be a JSON object of key id → secret');
  }
  return keys as Record<string, string>;
}

/** The decision for a valid policy and checkpoint (pure). */
export function decide(policy: ParPolicy, checkpoint: ParCheckpoint): PolicyDecision {
  const limits: Record<LimitName, number> = { ...policy.limits };
  for (const override of checkpoint.overrides) limits[override.limit] = override.value;
  const reasons: string[] = [];
  if (checkpoint.status !== 'running') reasons.push(`task_status:${checkpoint.status}`);
  const latestByGate = new Map<string, { timestamp: number; decision: string }>();
  for (const decision of checkpoint.decisions) {
    const timestamp = Date.parse(decision.timestamp);
    const known = latestByGate.get(decision.gate);
    if (!known || timestamp > known.timestamp)
      latestByGate.set(decision.gate, { timestamp, decision: decision.decision });
  }
  for (const [gate, { decision }] of latestByGate)
    if (decision !== 'approve') reasons.push(`human_gate:${gate}:${decision}`);
  for (const [metric, limit] of REACHED) {
    const observed = Number(checkpoint[metric]);
    if (observed >= limits[limit]) reasons.push(`limit_reached:${metric}=${observed}:${limit}=${limits[limit]}`);
  }
  for (const [metric, limit] of EXCEEDED) {
    const observed = Number(checkpoint[metric]);
    if (observed > limits[limit]) reasons.push(`limit_exceeded:${metric}=${observed}:${limit}=${limits[limit]}`);
  }
  let decision: PolicyDecision['decision'] = 'continue';
  let checkpointRequired = false;
  if (reasons.length > 0) decision = 'stop';
  else {
    const growth = checkpoint.transcript_bytes - checkpoint.last_checkpoint_transcript_bytes;
    if (growth >= limits.checkpoint_transcript_bytes) {
      decision = 'checkpoint';
      checkpointRequired = true;
      reasons.push(
        `checkpoint_required:transcript_growth=${growth}:checkpoint_transcript_bytes=${limits.checkpoint_transcript_bytes}`,
      );
    }
  }
  return {
    schema_version: 1,
    policy_id: policy.policy_id,
    policy_hash: policyHash(policy),
    decision,
    spawn_allowed:
      decision === 'continue' &&
      checkpoint.children_spawned < limits.max_children_per_parent &&
      checkpoint.active_children < limits.max_concurrency,
    checkpoint_required: checkpointRequired,
    reasons,
    effective_limits: Object.fromEntries(LIMIT_NAMES.map((name) => [name, limits[name]])),
    observed_metrics: Object.fromEntries(OBSERVED.map((metric) => [metric, Number(checkpoint[metric])])),
  };
}

/** The decision a failure to read or validate the input gives: stop, with the reason. */
export function failClosed(policyId: string, message: string): PolicyDecision {
  return {
    schema_version: 1,
    policy_id: policyId || 'unknown-policy',
    policy_hash: null,
    decision: 'stop',
    spawn_allowed: false,
    checkpoint_required: false,
    reasons: [`evaluation_error:${message}`],
    effective_limits: {},
    observed_metrics: {},
  };
}

/**
 * The policy engine: validates the policy and checkpoint (with the human keys) and decides.
 * Never throws: invalid input fails closed (`stop`, reason `evaluation_error:…`).
 */
export function evaluatePolicy(input: {
  policy: unknown;
  checkpoint: unknown;
  policyName: string;
  humanKeys?: Record<string, string>;
}): PolicyDecision {
  try {
    const policy = validatePolicy(input.policy);
    return decide(policy, validateCheckpoint(input.checkpoint, policy, input.humanKeys ?? {}));
  } catch (error) {
    return failClosed(input.policyName, (error as Error).message);
  }
}

/** The hash a decision names its policy by: SHA-256 of the policy's canonical JSON. */
export const policyHash = (policy: ParPolicy) => sha256(canonicalJson(policy));

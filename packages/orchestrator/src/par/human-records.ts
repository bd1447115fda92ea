import { createHmac, timingSafeEqual } from 'node:crypto';
import { invalidInput, type ParPolicy } from '@polish/protocol';
import { canonicalJson } from './canonical-json.js';
import { sha256 } from '../hash.js';

// Signed human records (agent-collab-harness v1): a decision on a gate, an override of a limit,
// a memory decision, a task spec. HMAC-SHA256 with the secret of a key the policy pins (by the
// SHA-256 of the secret in `human_authorization.key_hashes`), over the record's canonical JSON
// without `authorization`.

/** How a record is signed. */
export interface Authorization {
  scheme: 'hmac-sha256';
  key_id: string;
  signature: string;
}

const hmac = (secret: string, record: unknown) =>
  createHmac('sha256', secret).update(canonicalJson(record), 'utf8').digest();

/** Signs a human record with the key's secret: the record with its `authorization` added. */
export function signHumanRecord<T extends { actor: string }>(
  unsigned: T,
  keyId: string,
  secret: string,
): T & { authorization: Authorization } {
  const signature = hmac(secret, unsigned).toString('hex');
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
): void {
  const keyId = record.actor.slice('human:'.length);
  if (record.authorization.key_id !== keyId) throw invalidInput(where, `authorization.key_id is not the actor's key`);
  const secret = checkHumanKey(policy, secrets, keyId, where);
  const { authorization: _authorization, ...unsigned } = record;
  const given = Buffer.from(record.authorization.signature, 'hex');
  const expected = hmac(secret, unsigned);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalidInput(where, `bad signature`);
}

/** The key ids of the policy whose secret is configured and right, sorted: the keys this process can sign with. */
export function usableKeys(policy: ParPolicy, secrets: Record<string, string>): string[] {
  return Object.keys(policy.human_authorization.key_hashes)
    .filter(
      (keyId) =>
        secrets[keyId] !== undefined && sha256(secrets[keyId]) === policy.human_authorization.key_hashes[keyId],
    )
    .sort();
}

/**
 * Reads AGENT_COLLAB_HUMAN_KEYS_JSON (a JSON object: key id → secret), as the harness does: key
 * ids are non-empty without whitespace, secrets non-empty strings.
 */
export function humanKeysFrom(environment: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const raw = environment.AGENT_COLLAB_HUMAN_KEYS_JSON;
  if (raw === undefined) return {};
  let keys: unknown;
  try {
    keys = JSON.parse(raw);
  } catch {
    throw invalidInput('AGENT_COLLAB_HUMAN_KEYS_JSON', 'is not JSON');
  }
  if (!keys || typeof keys !== 'object' || Array.isArray(keys))
    throw invalidInput('AGENT_COLLAB_HUMAN_KEYS_JSON', 'must be a JSON object of key id → secret');
  for (const [keyId, secret] of Object.entries(keys)) {
    if (keyId === '' || /\s/.test(keyId))
      throw invalidInput('AGENT_COLLAB_HUMAN_KEYS_JSON', 'key ids must be non-empty and contain no whitespace');
    if (typeof secret !== 'string' || secret === '')
      throw invalidInput('AGENT_COLLAB_HUMAN_KEYS_JSON', `the secret of ${keyId} must be a non-empty string`);
  }
  return keys as Record<string, string>;
}

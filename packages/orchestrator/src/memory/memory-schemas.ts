import { z } from 'zod';
import { PolishError } from '@polish/protocol';
import { canonicalJson } from '../par/canonical-json.js';
import { sha256 } from '../hash.js';

// The files of memory proposals: `.coord/memory-proposals/<proposal_id>.json` and the lines of
// `events.jsonl`, their hash-chained log.

export const nonBlank = z.string().min(1).regex(/\S/, 'must not be blank');
const sha256Hex = z.string().regex(/^[a-f0-9]{64}$/);
const dateTime = z.iso.datetime({ offset: true });
const proposalId = z.string().regex(/^mp-[a-f0-9]{12}$/, 'must be mp-<12 hex digits>');

export const MemoryActionSchema = z.strictObject({
  operation: z.enum(['add', 'update', 'remove']),
  /** Where the lesson goes, e.g. `docs/lessons.md#testing`. */
  target_ref: nonBlank,
  summary: nonBlank.max(2000),
  evidence_refs: z.array(nonBlank).refine((refs) => new Set(refs).size === refs.length, 'must be unique'),
});
export type MemoryAction = z.infer<typeof MemoryActionSchema>;

/** A signed human decision on one proposal, bound to its content by `proposal_sha256`. */
export const MemoryDecisionSchema = z.strictObject({
  decision: z.enum(['approve', 'reject']),
  actor: z.string().regex(/^human:\S+$/),
  rationale: nonBlank,
  timestamp: dateTime,
  /** SHA-256 of the canonical JSON of the proposal as it was in state `proposed`. */
  proposal_sha256: sha256Hex,
  authorization: z.strictObject({
    scheme: z.literal('hmac-sha256'),
    key_id: z.string().regex(/^\S+$/),
    signature: sha256Hex,
  }),
});
export type MemoryDecision = z.infer<typeof MemoryDecisionSchema>;

export const STATE_OF = { approve: 'approved', reject: 'rejected' } as const;

/** `.coord/memory-proposals/<proposal_id>.json`. */
export const MemoryProposalSchema = z
  .strictObject({
    schema_version: z.literal(1),
    proposal_id: proposalId,
    source_task: nonBlank,
    action: MemoryActionSchema,
    state: z.enum(['proposed', 'approved', 'rejected']),
    created_at: dateTime,
    decision: MemoryDecisionSchema.nullable(),
  })
  .refine((proposal) => proposal.proposal_id === proposalIdOf(proposal), {
    path: ['proposal_id'],
    message: 'does not match the proposal content (edited after proposing?)',
  })
  .refine(
    (proposal) =>
      proposal.decision === null
        ? proposal.state === 'proposed'
        : proposal.state === STATE_OF[proposal.decision.decision],
    {
      path: ['state'],
      message: 'does not agree with decision',
    },
  );
export type MemoryProposal = z.infer<typeof MemoryProposalSchema>;

/** One line of `events.jsonl`. `sha256` covers every other field, `previous_sha256` chains the lines. */
export const MemoryEventSchema = z.strictObject({
  seq: z.int().min(1),
  type: z.enum(['proposed', 'approved', 'rejected']),
  proposal_id: proposalId,
  at: dateTime,
  /** On `proposed`: the hash a later decision must match. */
  proposal_sha256: sha256Hex.optional(),
  /** On `approved` / `rejected`: the signed human decision. */
  decision: MemoryDecisionSchema.optional(),
  previous_sha256: sha256Hex.nullable(),
  sha256: sha256Hex,
});
export type MemoryEvent = z.infer<typeof MemoryEventSchema>;

/** The id is derived from the content, so the same proposal made twice at once is one proposal. */
export function proposalIdOf(proposal: { source_task: string; action: MemoryAction; created_at: string }): string {
  const { source_task, action, created_at } = proposal;
  return `mp-${sha256(canonicalJson({ source_task, action, created_at })).slice(0, 12)}`;
}

/**
 * A refused or invalid memory-proposal operation; nothing was written. The one exception says so
 * in its message: the event was appended (the log is the record) but the proposal file after it
 * could not be written, which `verifyMemoryLog` then reports.
 */
export const memoryRefusal = (message: string, options: { cause?: unknown } = {}) =>
  new PolishError('INVALID_INPUT', message, { ...options, field: 'memory' });

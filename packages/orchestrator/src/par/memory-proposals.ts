import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { canonicalJson } from './canonical-json.js';
import { checkHumanKey, PolicyInputError, signHumanRecord, validatePolicy, verifyHumanRecord } from './policy-engine.js';

// Lessons for PAR memory are never applied directly: an agent proposes one (a file under
// `.coord/memory-proposals/`), and only a signed human decision approves or rejects it. Every
// step is an event in an append-only, hash-chained log (`events.jsonl`); the log is the record,
// the proposal files are its readable view.

const nonBlank = z.string().min(1).regex(/\S/, 'must not be blank');
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
  authorization: z.strictObject({ scheme: z.literal('hmac-sha256'), key_id: z.string().regex(/^\S+$/), signature: sha256Hex }),
});
export type MemoryDecision = z.infer<typeof MemoryDecisionSchema>;

const STATE_OF = { approve: 'approved', reject: 'rejected' } as const;

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
  .refine((proposal) => proposal.proposal_id === proposalIdOf(proposal), { path: ['proposal_id'], message: 'does not match the proposal content (edited after proposing?)' })
  .refine((proposal) => (proposal.decision === null ? proposal.state === 'proposed' : proposal.state === STATE_OF[proposal.decision.decision]), {
    path: ['state'],
    message: 'does not agree with decision',
  });
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

export interface MemoryLogCheck {
  /** The events that were read and checked (all of them when `ok`). */
  events: MemoryEvent[];
  ok: boolean;
  problem?: string;
}

/** A refused or invalid memory-proposal operation; nothing was written. */
export class MemoryProposalError extends Error {
  override readonly name = 'MemoryProposalError';
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const proposalsDir = (coordDir: string) => join(coordDir, 'memory-proposals');
const logPath = (coordDir: string) => join(proposalsDir(coordDir), 'events.jsonl');
const proposalPath = (coordDir: string, id: string) => join(proposalsDir(coordDir), `${id}.json`);
const firstIssue = (what: string, error: z.ZodError) => {
  const issue = error.issues[0];
  return `${what}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`;
};

/** The id is derived from the content, so the same proposal made twice at once is one proposal. */
export function proposalIdOf(proposal: { source_task: string; action: MemoryAction; created_at: string }): string {
  const { source_task, action, created_at } = proposal;
  return `mp-${sha256(canonicalJson({ source_task, action, created_at })).slice(0, 12)}`;
}

/** Replaces a file whole or not at all: a reader never sees half a proposal. */
function writeAtomically(path: string, text: string) {
  const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(temporary, text, { flag: 'wx' });
  renameSync(temporary, path);
}

/** Reads the log and checks every line: its shape, its hash, the chain, and that events follow each other sensibly. */
function readLog(coordDir: string): MemoryLogCheck {
  const path = logPath(coordDir);
  if (!existsSync(path)) return { events: [], ok: true };
  const text = readFileSync(path, 'utf8');
  const events: MemoryEvent[] = [];
  const fail = (problem: string): MemoryLogCheck => ({ events, ok: false, problem: `events.jsonl: ${problem}` });
  if (text !== '' && !text.endsWith('\n')) return fail('the last line is incomplete');
  const proposed = new Map<string, string>();
  const decided = new Set<string>();
  const lines = text === '' ? [] : text.slice(0, -1).split('\n');
  for (const [index, line] of lines.entries()) {
    const where = `line ${index + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      return fail(`${where} is not JSON`);
    }
    const parsed = MemoryEventSchema.safeParse(raw);
    if (!parsed.success) return fail(firstIssue(where, parsed.error));
    const event = parsed.data;
    const { sha256: given, ...body } = raw as Record<string, unknown>;
    if (sha256(canonicalJson(body)) !== given) return fail(`${where} was edited: its sha256 does not match its content`);
    if (event.seq !== index + 1) return fail(`${where} has seq ${event.seq}, expected ${index + 1}`);
    if (event.previous_sha256 !== (events.at(-1)?.sha256 ?? null)) return fail(`${where} does not chain to the line before (previous_sha256)`);
    if (event.type === 'proposed') {
      if (!event.proposal_sha256 || event.decision) return fail(`${where}: a proposed event carries proposal_sha256 and no decision`);
      if (proposed.has(event.proposal_id)) return fail(`${where}: ${event.proposal_id} is proposed twice`);
      proposed.set(event.proposal_id, event.proposal_sha256);
    } else {
      if (!event.decision || event.proposal_sha256) return fail(`${where}: a decision event carries a decision and no proposal_sha256`);
      if (!proposed.has(event.proposal_id)) return fail(`${where}: ${event.proposal_id} is decided before it is proposed`);
      if (decided.has(event.proposal_id)) return fail(`${where}: ${event.proposal_id} is decided twice`);
      if (STATE_OF[event.decision.decision] !== event.type) return fail(`${where}: type ${event.type} disagrees with decision ${event.decision.decision}`);
      if (event.decision.proposal_sha256 !== proposed.get(event.proposal_id)) return fail(`${where}: the decision is about other content than was proposed`);
      decided.add(event.proposal_id);
    }
    events.push(event);
  }
  return { events, ok: true };
}

/** Appends one event after re-verifying the whole log: an edited or broken log is never extended. */
function appendEvent(coordDir: string, fields: Pick<MemoryEvent, 'type' | 'proposal_id' | 'at' | 'proposal_sha256' | 'decision'>): MemoryEvent {
  const log = readLog(coordDir);
  if (!log.ok) throw new MemoryProposalError(`refusing to append to a log that does not verify: ${log.problem}`);
  const body = { seq: log.events.length + 1, ...fields, previous_sha256: log.events.at(-1)?.sha256 ?? null };
  const event = { ...body, sha256: sha256(canonicalJson(body)) };
  // One write of one whole line; earlier lines are never rewritten.
  appendFileSync(logPath(coordDir), `${JSON.stringify(event)}\n`);
  return event;
}

function readProposal(coordDir: string, id: string): MemoryProposal {
  const path = proposalPath(coordDir, id);
  if (!existsSync(path)) throw new MemoryProposalError(`no proposal ${id}`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new MemoryProposalError(`${id}.json is not JSON`);
  }
  const parsed = MemoryProposalSchema.safeParse(raw);
  if (!parsed.success) throw new MemoryProposalError(firstIssue(`${id}.json`, parsed.error));
  if (parsed.data.proposal_id !== id) throw new MemoryProposalError(`${id}.json holds proposal ${parsed.data.proposal_id}`);
  return parsed.data;
}

/** Records a new proposal (state `proposed`): its file, then its `proposed` event. */
export function proposeMemory(coordDir: string, input: { source_task: string; action: MemoryAction }, now: Date = new Date()): MemoryProposal {
  const created_at = now.toISOString();
  const fields = z.strictObject({ source_task: nonBlank, action: MemoryActionSchema }).safeParse(input);
  if (!fields.success) throw new MemoryProposalError(firstIssue('proposal', fields.error));
  const proposal: MemoryProposal = {
    schema_version: 1,
    proposal_id: proposalIdOf({ ...fields.data, created_at }),
    ...fields.data,
    state: 'proposed',
    created_at,
    decision: null,
  };
  const log = readLog(coordDir);
  if (!log.ok) throw new MemoryProposalError(`refusing to append to a log that does not verify: ${log.problem}`);
  const path = proposalPath(coordDir, proposal.proposal_id);
  if (existsSync(path)) throw new MemoryProposalError(`proposal ${proposal.proposal_id} already exists`);
  mkdirSync(proposalsDir(coordDir), { recursive: true });
  // The file first: a `proposed` event always has a file to decide on.
  writeAtomically(path, `${JSON.stringify(proposal, null, 2)}\n`);
  appendEvent(coordDir, { type: 'proposed', proposal_id: proposal.proposal_id, at: created_at, proposal_sha256: sha256(canonicalJson(proposal)) });
  return proposal;
}

/** Every proposal file, oldest first. Throws on a file that is not a valid proposal. */
export function listMemoryProposals(coordDir: string): MemoryProposal[] {
  const dir = proposalsDir(coordDir);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => /^mp-[a-f0-9]{12}\.json$/.test(name))
    .map((name) => readProposal(coordDir, name.slice(0, -'.json'.length)))
    .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.proposal_id.localeCompare(b.proposal_id));
}

/**
 * Approves or rejects a proposal with a signed human decision: the key must be the policy's and
 * its secret must be given. Only a proposal still `proposed`, unchanged since it was proposed,
 * can be decided. The event is the commit point; the proposal file is updated after it.
 */
export function decideMemoryProposal(
  coordDir: string,
  id: string,
  input: { decision: 'approve' | 'reject'; keyId: string; rationale: string; policy: unknown; secrets: Record<string, string> },
  now: Date = new Date(),
): MemoryProposal {
  const where = `${input.decision} ${id}`;
  if (!nonBlank.safeParse(input.rationale).success) throw new MemoryProposalError(`${where}: a rationale is required`);
  let secret: string;
  try {
    secret = checkHumanKey(validatePolicy(input.policy), input.secrets, input.keyId, where);
  } catch (error) {
    if (error instanceof PolicyInputError) throw new MemoryProposalError(error.message, { cause: error });
    throw error;
  }
  const log = readLog(coordDir);
  if (!log.ok) throw new MemoryProposalError(`refusing to append to a log that does not verify: ${log.problem}`);
  const proposal = readProposal(coordDir, id);
  const proposed = log.events.find((event) => event.type === 'proposed' && event.proposal_id === id);
  if (!proposed) throw new MemoryProposalError(`${where}: the log has no proposed event for it`);
  const earlier = log.events.find((event) => event.type !== 'proposed' && event.proposal_id === id);
  if (earlier || proposal.state !== 'proposed') throw new MemoryProposalError(`${where}: it is already ${earlier?.type ?? proposal.state}`);
  const proposalSha256 = sha256(canonicalJson(proposal));
  if (proposalSha256 !== proposed.proposal_sha256) throw new MemoryProposalError(`${where}: the proposal file changed since it was proposed`);
  const at = now.toISOString();
  const decision = signHumanRecord(
    { decision: input.decision, actor: `human:${input.keyId}`, rationale: input.rationale, timestamp: at, proposal_sha256: proposalSha256 },
    input.keyId,
    secret,
  );
  appendEvent(coordDir, { type: STATE_OF[input.decision], proposal_id: id, at, decision });
  const decided: MemoryProposal = { ...proposal, state: STATE_OF[input.decision], decision };
  writeAtomically(proposalPath(coordDir, id), `${JSON.stringify(decided, null, 2)}\n`);
  return decided;
}

/**
 * Checks the log (every line's hash, the chain, the order of events) and that the proposal files
 * agree with it. Given the policy and secrets, also checks every decision's signature, which is
 * what makes a recorded approval unforgeable: anyone can recompute a hash chain.
 */
export function verifyMemoryLog(coordDir: string, keys?: { policy: unknown; secrets: Record<string, string> }): MemoryLogCheck {
  const log = readLog(coordDir);
  if (!log.ok) return log;
  const fail = (problem: string): MemoryLogCheck => ({ events: log.events, ok: false, problem });
  try {
    if (keys) {
      const policy = validatePolicy(keys.policy);
      for (const event of log.events) if (event.decision) verifyHumanRecord(event.decision, policy, keys.secrets, `events.jsonl: line ${event.seq}`);
    }
    const files = new Map(listMemoryProposals(coordDir).map((proposal) => [proposal.proposal_id, proposal]));
    for (const event of log.events) {
      const file = files.get(event.proposal_id);
      if (!file) return fail(`${event.proposal_id}.json is missing (events.jsonl line ${event.seq})`);
      if (event.type === 'proposed' && sha256(canonicalJson({ ...file, state: 'proposed', decision: null })) !== event.proposal_sha256) {
        return fail(`${event.proposal_id}.json changed since it was proposed`);
      }
    }
    for (const file of files.values()) {
      const last = log.events.filter((event) => event.proposal_id === file.proposal_id).at(-1);
      if (!last) return fail(`${file.proposal_id}.json has no proposed event in the log`);
      if (last.type !== file.state || canonicalJson(last.decision ?? null) !== canonicalJson(file.decision)) {
        return fail(`${file.proposal_id}.json says ${file.state}, the log says ${last.type}`);
      }
    }
  } catch (error) {
    if (error instanceof MemoryProposalError || error instanceof PolicyInputError) return fail(error.message);
    throw error;
  }
  return log;
}

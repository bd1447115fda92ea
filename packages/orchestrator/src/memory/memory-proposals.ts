import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { firstIssue, isInvalidInput } from '@polish/protocol';
import { canonicalJson } from '../par/canonical-json.js';
import { trustPolicy } from '../par/goal-engine.js';
import { checkHumanKey, signHumanRecord, verifyHumanRecord } from '../par/human-records.js';
import { sha256 } from '../hash.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { withLockFile } from '../lock-file.js';
import {
  advanceHead,
  appendEvent,
  createHead,
  proposalsDir,
  readLog,
  verifiedLog,
  type MemoryLogCheck,
} from './memory-log.js';
import {
  MemoryActionSchema,
  MemoryProposalSchema,
  STATE_OF,
  memoryRefusal,
  nonBlank,
  proposalIdOf,
  type MemoryAction,
  type MemoryEvent,
  type MemoryProposal,
} from './memory-schemas.js';

// Lessons for PAR memory are never applied directly: an agent proposes one (a file under
// `.coord/memory-proposals/`), and only a signed human decision approves or rejects it. Every
// step is an event in an append-only, hash-chained log (`events.jsonl`, memory-log.ts); the log is
// the record, the proposal files are its readable view. Every read-verify-append runs under an
// exclusive lock file (lock-file.ts), so concurrent writers, in one process or many, extend the
// log one at a time.

const proposalPath = (coordDir: string, id: string) => join(proposalsDir(coordDir), `${id}.json`);
const lockPath = (coordDir: string) => join(proposalsDir(coordDir), '.lock');
const withLock = <T>(coordDir: string, body: () => T, options: { readOnly?: boolean } = {}) =>
  withLockFile(lockPath(coordDir), body, options);
const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;
const issueIn = (what: string, error: z.ZodError) => {
  const issue = firstIssue(error);
  return `${what}: ${issue.path}: ${issue.message}`;
};

/** Writes a proposal file after its event is in the log; a failure here leaves the log ahead of the file, and says so. */
function writeProposalAfter(coordDir: string, event: MemoryEvent, proposal: MemoryProposal) {
  try {
    writeFileAtomic(proposalPath(coordDir, proposal.proposal_id), `${JSON.stringify(proposal, null, 2)}\n`);
  } catch (error) {
    throw memoryRefusal(
      `${event.proposal_id} is recorded as ${event.type} in events.jsonl line ${event.seq}, but ${event.proposal_id}.json could not be written (${errorCode(error) ?? (error as Error).message})`,
      { cause: error },
    );
  }
}

function readProposal(coordDir: string, id: string, events: MemoryEvent[] = []): MemoryProposal {
  const path = proposalPath(coordDir, id);
  if (!existsSync(path)) {
    const recorded = events.find((event) => event.proposal_id === id);
    if (recorded)
      throw memoryRefusal(`${id}.json is missing, but events.jsonl line ${recorded.seq} records the proposal`);
    throw memoryRefusal(`no proposal ${id}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw memoryRefusal(`${id}.json is not JSON`);
  }
  const parsed = MemoryProposalSchema.safeParse(raw);
  if (!parsed.success) throw memoryRefusal(issueIn(`${id}.json`, parsed.error));
  if (parsed.data.proposal_id !== id) throw memoryRefusal(`${id}.json holds proposal ${parsed.data.proposal_id}`);
  return parsed.data;
}

/** Records a new proposal (state `proposed`): its `proposed` event, then its file. */
export function proposeMemory(
  coordDir: string,
  input: { source_task: string; action: MemoryAction },
  now: Date = new Date(),
): MemoryProposal {
  const created_at = now.toISOString();
  const fields = z.strictObject({ source_task: nonBlank, action: MemoryActionSchema }).safeParse(input);
  if (!fields.success) throw memoryRefusal(issueIn('proposal', fields.error));
  const proposal: MemoryProposal = {
    schema_version: 1,
    proposal_id: proposalIdOf({ ...fields.data, created_at }),
    ...fields.data,
    state: 'proposed',
    created_at,
    decision: null,
  };
  // A new folder gets the head of an empty log; an existing one keeps its own (never re-created).
  if (mkdirSync(proposalsDir(coordDir), { recursive: true }) !== undefined) createHead(coordDir);
  return withLock(coordDir, () => {
    const events = verifiedLog(coordDir);
    if (
      existsSync(proposalPath(coordDir, proposal.proposal_id)) ||
      events.some((event) => event.proposal_id === proposal.proposal_id)
    ) {
      throw memoryRefusal(`proposal ${proposal.proposal_id} already exists`);
    }
    // The event first: the log is the record. Should the file then fail, the log says what it lacks.
    const event = appendEvent(coordDir, events, {
      type: 'proposed',
      proposal_id: proposal.proposal_id,
      at: created_at,
      proposal_sha256: sha256(canonicalJson(proposal)),
    });
    writeProposalAfter(coordDir, event, proposal);
    advanceHead(coordDir, event);
    return proposal;
  });
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
  input: {
    decision: 'approve' | 'reject';
    keyId: string;
    rationale: string;
    policy: unknown;
    secrets: Record<string, string>;
  },
  now: Date = new Date(),
): MemoryProposal {
  const where = `${input.decision} ${id}`;
  if (!nonBlank.safeParse(input.rationale).success) throw memoryRefusal(`${where}: a rationale is required`);
  const secret = checkHumanKey(trustPolicy(input.policy), input.secrets, input.keyId, where);
  if (!existsSync(proposalsDir(coordDir))) throw memoryRefusal(`no proposal ${id}`);
  return withLock(coordDir, () => {
    const events = verifiedLog(coordDir);
    const proposal = readProposal(coordDir, id, events);
    const proposed = events.find((event) => event.type === 'proposed' && event.proposal_id === id);
    if (!proposed) throw memoryRefusal(`${where}: the log has no proposed event for it`);
    const earlier = events.find((event) => event.type !== 'proposed' && event.proposal_id === id);
    if (earlier || proposal.state !== 'proposed')
      throw memoryRefusal(`${where}: it is already ${earlier?.type ?? proposal.state}`);
    const proposalSha256 = sha256(canonicalJson(proposal));
    if (proposalSha256 !== proposed.proposal_sha256)
      throw memoryRefusal(`${where}: the proposal file changed since it was proposed`);
    const at = now.toISOString();
    const decision = signHumanRecord(
      {
        decision: input.decision,
        actor: `human:${input.keyId}`,
        rationale: input.rationale,
        timestamp: at,
        proposal_sha256: proposalSha256,
      },
      input.keyId,
      secret,
    );
    const event = appendEvent(coordDir, events, { type: STATE_OF[input.decision], proposal_id: id, at, decision });
    const decided: MemoryProposal = { ...proposal, state: STATE_OF[input.decision], decision };
    writeProposalAfter(coordDir, event, decided);
    advanceHead(coordDir, event);
    return decided;
  });
}

/**
 * Checks the log (every line's hash, the chain, the order of events) and that the proposal files
 * agree with it. Given the policy and secrets, also checks every decision's signature, which is
 * what makes a recorded approval unforgeable: anyone can recompute a hash chain. Reads under the
 * lock, so a writer between its event and its file is not mistaken for a missing file.
 */
export function verifyMemoryLog(
  coordDir: string,
  keys?: { policy: unknown; secrets: Record<string, string> },
): MemoryLogCheck {
  if (!existsSync(proposalsDir(coordDir))) return readLog(coordDir);
  return withLock(coordDir, () => checkLogAndFiles(coordDir, keys), { readOnly: true });
}

function checkLogAndFiles(
  coordDir: string,
  keys?: { policy: unknown; secrets: Record<string, string> },
): MemoryLogCheck {
  const log = readLog(coordDir);
  if (!log.ok) return log;
  const fail = (problem: string): MemoryLogCheck => ({ events: log.events, ok: false, problem });
  try {
    if (keys) {
      const policy = trustPolicy(keys.policy);
      for (const event of log.events)
        if (event.decision) verifyHumanRecord(event.decision, policy, keys.secrets, `events.jsonl: line ${event.seq}`);
    }
    const files = new Map(listMemoryProposals(coordDir).map((proposal) => [proposal.proposal_id, proposal]));
    for (const event of log.events) {
      const file = files.get(event.proposal_id);
      if (!file)
        return fail(`${event.proposal_id}.json is missing, but events.jsonl line ${event.seq} records the proposal`);
      if (
        event.type === 'proposed' &&
        sha256(canonicalJson({ ...file, state: 'proposed', decision: null })) !== event.proposal_sha256
      ) {
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
    if (isInvalidInput(error)) return fail(error.message);
    throw error;
  }
  return log;
}

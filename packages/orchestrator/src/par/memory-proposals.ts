import { createHash, randomBytes } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { canonicalJson } from './canonical-json.js';
import {
  checkHumanKey,
  PolicyInputError,
  signHumanRecord,
  validatePolicy,
  verifyHumanRecord,
} from './policy-engine.js';

// Lessons for PAR memory are never applied directly: an agent proposes one (a file under
// `.coord/memory-proposals/`), and only a signed human decision approves or rejects it. Every
// step is an event in an append-only, hash-chained log (`events.jsonl`); the log is the record,
// the proposal files are its readable view. Every read-verify-append runs under an exclusive lock
// file (`.lock`), so concurrent writers, in one process or many, extend the log one at a time.

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
  authorization: z.strictObject({
    scheme: z.literal('hmac-sha256'),
    key_id: z.string().regex(/^\S+$/),
    signature: sha256Hex,
  }),
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

export interface MemoryLogCheck {
  /** The events that were read and checked (all of them when `ok`). */
  events: MemoryEvent[];
  ok: boolean;
  problem?: string;
}

/**
 * A refused or invalid memory-proposal operation; nothing was written. The one exception says so
 * in its message: the event was appended (the log is the record) but the proposal file after it
 * could not be written, which `verifyMemoryLog` then reports.
 */
export class MemoryProposalError extends Error {
  override readonly name = 'MemoryProposalError';
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const proposalsDir = (coordDir: string) => join(coordDir, 'memory-proposals');
const logPath = (coordDir: string) => join(proposalsDir(coordDir), 'events.jsonl');
const proposalPath = (coordDir: string, id: string) => join(proposalsDir(coordDir), `${id}.json`);
const lockPath = (coordDir: string) => join(proposalsDir(coordDir), '.lock');
const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;
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
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    writeFileSync(temporary, text, { flag: 'wx' });
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}

/** How long a writer waits for the lock. Not exported from the package; tests shorten it. */
export const memoryLockSettings = { timeoutMs: 10_000 };
/** A lock file still without a pid this long after it was created belongs to a writer that died in between. */
const UNWRITTEN_LOCK_GRACE_MS = 2_000;

/** Blocks this thread for `ms` (the functions here are synchronous, and the CLI relies on that). */
const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errorCode(error) !== 'ESRCH'; // EPERM: alive, someone else's
  }
}

/** The pid in a lock file, `null` while its holder has not written it yet, `undefined` when the file is gone. */
function lockHolder(path: string): { pid: number | null; ageMs: number } | undefined {
  try {
    const text = readFileSync(path, 'utf8').trim();
    const ageMs = Date.now() - statSync(path).mtimeMs;
    return { pid: /^[1-9]\d*$/.test(text) ? Number(text) : null, ageMs };
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/** Whether the lock file's holder is gone: its pid is not a live process, or it never wrote one. */
function holderGone(path: string): boolean {
  const holder = lockHolder(path);
  if (!holder) return false; // released meanwhile: just try again
  return holder.pid === null ? holder.ageMs > UNWRITTEN_LOCK_GRACE_MS : !isAlive(holder.pid);
}

/** Creates `path` exclusively with this process's pid in it; false when it already exists. */
function tryCreateLock(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx');
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  }
  try {
    writeFileSync(fd, `${process.pid}\n`);
  } catch (error) {
    rmSync(path, { force: true });
    throw error;
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Removes the lock when its holder died. Breaking is itself done under a second lock file, and
 * the holder is checked again under it: two writers that both saw the same stale lock can then
 * never remove the fresh lock that one of them took after breaking it.
 */
function breakStaleLock(path: string) {
  if (!holderGone(path)) return;
  const breaker = `${path}.break`;
  if (!tryCreateLock(breaker)) {
    if (holderGone(breaker)) rmSync(breaker, { force: true }); // a breaker that died while breaking
    return;
  }
  try {
    if (holderGone(path)) rmSync(path, { force: true });
  } finally {
    rmSync(breaker, { force: true });
  }
}

/**
 * Runs `body` holding `.coord/memory-proposals/.lock`. Waits with a short, growing backoff for a
 * live holder, removes the lock of a dead one, and gives up after `memoryLockSettings.timeoutMs`.
 * With `readOnly`, a folder where the lock cannot be created at all (read-only) is read unlocked.
 */
function withLock<T>(coordDir: string, body: () => T, options: { readOnly?: boolean } = {}): T {
  const path = lockPath(coordDir);
  const deadline = Date.now() + memoryLockSettings.timeoutMs;
  for (let attempt = 0; ; attempt += 1) {
    let acquired: boolean;
    try {
      acquired = tryCreateLock(path);
    } catch (error) {
      if (options.readOnly && ['EACCES', 'EPERM', 'EROFS'].includes(errorCode(error) ?? '')) return body();
      throw error;
    }
    if (acquired) {
      try {
        return body();
      } finally {
        rmSync(path, { force: true });
      }
    }
    breakStaleLock(path);
    const left = deadline - Date.now();
    if (left <= 0) {
      const pid = lockHolder(path)?.pid;
      throw new MemoryProposalError(
        `timed out after ${memoryLockSettings.timeoutMs} ms waiting for the lock ${path}${pid ? ` (held by pid ${pid})` : ''}; remove it if no polish process is writing memory proposals`,
      );
    }
    // 1, 2, 4 … 32 ms, with jitter so that waiting writers do not retry in step.
    sleepSync(Math.min(left, Math.min(2 ** attempt, 32) * (0.5 + Math.random())));
  }
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
    if (sha256(canonicalJson(body)) !== given)
      return fail(`${where} was edited: its sha256 does not match its content`);
    if (event.seq !== index + 1) return fail(`${where} has seq ${event.seq}, expected ${index + 1}`);
    if (event.previous_sha256 !== (events.at(-1)?.sha256 ?? null))
      return fail(`${where} does not chain to the line before (previous_sha256)`);
    if (event.type === 'proposed') {
      if (!event.proposal_sha256 || event.decision)
        return fail(`${where}: a proposed event carries proposal_sha256 and no decision`);
      if (proposed.has(event.proposal_id)) return fail(`${where}: ${event.proposal_id} is proposed twice`);
      proposed.set(event.proposal_id, event.proposal_sha256);
    } else {
      if (!event.decision || event.proposal_sha256)
        return fail(`${where}: a decision event carries a decision and no proposal_sha256`);
      if (!proposed.has(event.proposal_id))
        return fail(`${where}: ${event.proposal_id} is decided before it is proposed`);
      if (decided.has(event.proposal_id)) return fail(`${where}: ${event.proposal_id} is decided twice`);
      if (STATE_OF[event.decision.decision] !== event.type)
        return fail(`${where}: type ${event.type} disagrees with decision ${event.decision.decision}`);
      if (event.decision.proposal_sha256 !== proposed.get(event.proposal_id))
        return fail(`${where}: the decision is about other content than was proposed`);
      decided.add(event.proposal_id);
    }
    events.push(event);
  }
  return { events, ok: true };
}

/** The whole log, checked: an edited or broken log is never extended. Call it holding the lock. */
function verifiedLog(coordDir: string): MemoryEvent[] {
  const log = readLog(coordDir);
  if (!log.ok) throw new MemoryProposalError(`refusing to append to a log that does not verify: ${log.problem}`);
  return log.events;
}

/** Appends one event to the log `events` was just read from, holding the lock throughout. */
function appendEvent(
  coordDir: string,
  events: MemoryEvent[],
  fields: Pick<MemoryEvent, 'type' | 'proposal_id' | 'at' | 'proposal_sha256' | 'decision'>,
): MemoryEvent {
  const body = { seq: events.length + 1, ...fields, previous_sha256: events.at(-1)?.sha256 ?? null };
  const event = { ...body, sha256: sha256(canonicalJson(body)) };
  const path = logPath(coordDir);
  const size = existsSync(path) ? statSync(path).size : 0;
  // One write of one whole line; earlier lines are never rewritten.
  try {
    appendFileSync(path, `${JSON.stringify(event)}\n`);
  } catch (error) {
    // A part of a line would leave the log unusable: cut it back to what it was.
    try {
      if (existsSync(path)) truncateSync(path, size);
    } catch {
      // the log then says its last line is incomplete
    }
    throw new MemoryProposalError(`cannot append to events.jsonl (${errorCode(error) ?? (error as Error).message})`, {
      cause: error,
    });
  }
  return event;
}

/** Writes a proposal file after its event is in the log; a failure here leaves the log ahead of the file, and says so. */
function writeProposalAfter(coordDir: string, event: MemoryEvent, proposal: MemoryProposal) {
  try {
    writeAtomically(proposalPath(coordDir, proposal.proposal_id), `${JSON.stringify(proposal, null, 2)}\n`);
  } catch (error) {
    throw new MemoryProposalError(
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
      throw new MemoryProposalError(
        `${id}.json is missing, but events.jsonl line ${recorded.seq} records the proposal`,
      );
    throw new MemoryProposalError(`no proposal ${id}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new MemoryProposalError(`${id}.json is not JSON`);
  }
  const parsed = MemoryProposalSchema.safeParse(raw);
  if (!parsed.success) throw new MemoryProposalError(firstIssue(`${id}.json`, parsed.error));
  if (parsed.data.proposal_id !== id)
    throw new MemoryProposalError(`${id}.json holds proposal ${parsed.data.proposal_id}`);
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
  if (!fields.success) throw new MemoryProposalError(firstIssue('proposal', fields.error));
  const proposal: MemoryProposal = {
    schema_version: 1,
    proposal_id: proposalIdOf({ ...fields.data, created_at }),
    ...fields.data,
    state: 'proposed',
    created_at,
    decision: null,
  };
  mkdirSync(proposalsDir(coordDir), { recursive: true });
  return withLock(coordDir, () => {
    const events = verifiedLog(coordDir);
    if (
      existsSync(proposalPath(coordDir, proposal.proposal_id)) ||
      events.some((event) => event.proposal_id === proposal.proposal_id)
    ) {
      throw new MemoryProposalError(`proposal ${proposal.proposal_id} already exists`);
    }
    // The event first: the log is the record. Should the file then fail, the log says what it lacks.
    const event = appendEvent(coordDir, events, {
      type: 'proposed',
      proposal_id: proposal.proposal_id,
      at: created_at,
      proposal_sha256: sha256(canonicalJson(proposal)),
    });
    writeProposalAfter(coordDir, event, proposal);
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
  if (!nonBlank.safeParse(input.rationale).success) throw new MemoryProposalError(`${where}: a rationale is required`);
  let secret: string;
  try {
    secret = checkHumanKey(validatePolicy(input.policy), input.secrets, input.keyId, where);
  } catch (error) {
    if (error instanceof PolicyInputError) throw new MemoryProposalError(error.message, { cause: error });
    throw error;
  }
  if (!existsSync(proposalsDir(coordDir))) throw new MemoryProposalError(`no proposal ${id}`);
  return withLock(coordDir, () => {
    const events = verifiedLog(coordDir);
    const proposal = readProposal(coordDir, id, events);
    const proposed = events.find((event) => event.type === 'proposed' && event.proposal_id === id);
    if (!proposed) throw new MemoryProposalError(`${where}: the log has no proposed event for it`);
    const earlier = events.find((event) => event.type !== 'proposed' && event.proposal_id === id);
    if (earlier || proposal.state !== 'proposed')
      throw new MemoryProposalError(`${where}: it is already ${earlier?.type ?? proposal.state}`);
    const proposalSha256 = sha256(canonicalJson(proposal));
    if (proposalSha256 !== proposed.proposal_sha256)
      throw new MemoryProposalError(`${where}: the proposal file changed since it was proposed`);
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
      const policy = validatePolicy(keys.policy);
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
    if (error instanceof MemoryProposalError || error instanceof PolicyInputError) return fail(error.message);
    throw error;
  }
  return log;
}

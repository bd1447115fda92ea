import { appendFileSync, existsSync, readFileSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson } from '../par/canonical-json.js';
import { sha256 } from '../hash.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { firstIssue } from '@polish/protocol';
import { MemoryEventSchema, STATE_OF, memoryRefusal, type MemoryEvent } from './memory-schemas.js';

// `events.jsonl`: one JSON event per line; each line's `sha256` covers its other fields and
// `previous_sha256` chains it to the line before, so an edited or reordered line is found.
// `events.head.json` anchors the last event ({seq, sha256}), so a line dropped from the end is
// found too: it is created with the folder and moved on after each event is recorded (a log may
// be ahead of its head by the events of a writer that stopped in between, never behind it).

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;

/** Where a coordination folder keeps its proposals and their log. */
export const proposalsDir = (coordDir: string) => join(coordDir, 'memory-proposals');
export const logPath = (coordDir: string) => join(proposalsDir(coordDir), 'events.jsonl');
export const headPath = (coordDir: string) => join(proposalsDir(coordDir), 'events.head.json');

/** Creates the head of a new, empty log: call it right after creating the folder, never again. */
export function createHead(coordDir: string): void {
  try {
    // Whole or not at all (a link of a full temp file): a writer that created the folder a moment
    // ago must not show another an empty head (it would read as a broken log).
    writeFileAtomic(headPath(coordDir), `${JSON.stringify({ seq: 0, sha256: null })}\n`, { overwrite: false });
  } catch (error) {
    // Another writer got there first (and may have recorded an event already): its head stands.
    if (errorCode(error) !== 'EEXIST') throw error;
  }
}

/** Moves the head on to an event just recorded. Best effort: a head left behind is caught up by the next event. */
export function advanceHead(coordDir: string, event: MemoryEvent): void {
  try {
    writeFileAtomic(headPath(coordDir), `${JSON.stringify({ seq: event.seq, sha256: event.sha256 })}\n`);
  } catch {
    // The log is the record and may be ahead of its head; the next event moves the head past it.
  }
}

/** The problem with the log's anchored head, if any: it must name one of the log's events. */
function headProblem(coordDir: string, events: MemoryEvent[]): string | undefined {
  let head: { seq?: unknown; sha256?: unknown };
  try {
    head = JSON.parse(readFileSync(headPath(coordDir), 'utf8')) as typeof head;
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') return 'events.head.json is not readable JSON';
    return events.length > 0 ? "events.head.json is missing: the log's last events are not anchored" : undefined;
  }
  const seq = head.seq;
  if (typeof seq !== 'number' || !Number.isInteger(seq) || seq < 0) return 'events.head.json has no valid seq';
  if (seq > events.length)
    return `events.jsonl ends at line ${events.length} but its head names line ${seq}: lines were removed`;
  const expected = seq === 0 ? null : (events[seq - 1]?.sha256 ?? null);
  if (head.sha256 !== expected) return `events.jsonl line ${seq} is not the event its head names`;
  return undefined;
}

export interface MemoryLogCheck {
  /** The events that were read and checked (all of them when `ok`). */
  events: MemoryEvent[];
  ok: boolean;
  problem?: string;
}

/** Reads the log and checks every line: its shape, its hash, the chain, and that events follow each other sensibly. */
export function readLog(coordDir: string): MemoryLogCheck {
  const path = logPath(coordDir);
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
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
    if (!parsed.success) {
      const issue = firstIssue(parsed.error);
      return fail(`${where}: ${issue.path}: ${issue.message}`);
    }
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
  const problem = headProblem(coordDir, events);
  return problem ? { events, ok: false, problem } : { events, ok: true };
}

/** The whole log, checked: an edited or broken log is never extended. Call it holding the lock. */
export function verifiedLog(coordDir: string): MemoryEvent[] {
  const log = readLog(coordDir);
  if (!log.ok) throw memoryRefusal(`refusing to append to a log that does not verify: ${log.problem}`);
  return log.events;
}

/** Appends one event to the log `events` was just read from, holding the lock throughout. */
export function appendEvent(
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
    throw memoryRefusal(`cannot append to events.jsonl (${errorCode(error) ?? (error as Error).message})`, {
      cause: error,
    });
  }
  return event;
}

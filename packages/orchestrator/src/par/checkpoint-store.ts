import { lstatSync, readFileSync } from 'node:fs';
import { basename, dirname, join, parse, resolve, sep } from 'node:path';
import { invalidInput, isInvalidInput, type GoalCheckpointInput } from '@polish/protocol';
import { withLockFile } from '../lock-file.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { sha256 } from '../hash.js';
import { prettySortedJson } from './canonical-json.js';
import { parseStrictJson } from './strict-json.js';
import { advanceCheckpoint } from './goal-slices.js';
import { validateGoalCheckpoint } from './goal-engine.js';

// Goal checkpoint files changed safely, as the harness's checkpoint_store.py (0.5.x): under a
// lock, never through a symbolic link, compare-and-swap on the file's SHA-256, written to an
// fsynced temporary file and published atomically (rename to replace, link to create without
// overwriting).

const refused = (problem: string) => invalidInput('checkpoint', problem);
const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;

/** Refuses a path any existing component of which is a symbolic link. */
function checkNoLinks(path: string): void {
  let current = parse(path).root;
  for (const part of path.slice(current.length).split(sep).filter(Boolean)) {
    current = join(current, part);
    let isLink = false;
    try {
      isLink = lstatSync(current).isSymbolicLink();
    } catch (error) {
      if (errorCode(error) === 'ENOENT') continue;
      throw refused(`cannot inspect ${current} (${errorCode(error)})`);
    }
    if (isLink) throw refused(`the checkpoint path contains a symbolic link: ${current}`);
  }
}

/** Reads a goal checkpoint file and the SHA-256 of its bytes. */
export function readGoalFile(path: string): { state: GoalCheckpointInput; sha256: string } {
  const checkpoint = resolve(path);
  checkNoLinks(checkpoint);
  let raw: Buffer;
  try {
    if (!lstatSync(checkpoint).isFile()) throw refused(`not a regular file: ${checkpoint}`);
    raw = readFileSync(checkpoint);
  } catch (error) {
    if (isInvalidInput(error)) throw error;
    throw refused(`cannot read ${checkpoint} (${errorCode(error)})`);
  }
  let document: unknown;
  try {
    document = parseStrictJson(raw.toString('utf8'));
  } catch (error) {
    throw refused(`${basename(checkpoint)} is not a JSON object (${(error as Error).message})`);
  }
  return { state: validateGoalCheckpoint(document), sha256: sha256(raw) };
}

/**
 * Advances the slice of a goal checkpoint file (`advance_file`): a request id already recorded
 * returns the file's state unchanged; a file whose SHA-256 is not `expectedSha256` is refused
 * and left as it is; otherwise the advanced state replaces it atomically.
 */
export function advanceGoalFile(
  path: string,
  policy: unknown,
  requestId: string,
  expectedSha256: string | undefined,
  secrets: Record<string, string>,
): GoalCheckpointInput {
  const checkpoint = resolve(path);
  if (expectedSha256 !== undefined && !/^[a-f0-9]{64}$/.test(expectedSha256))
    throw invalidInput('expected-sha256', 'must be a lower-case SHA-256 digest');
  checkNoLinks(`${checkpoint}.lock`);
  return withLockFile(`${checkpoint}.lock`, () => {
    const { state, sha256: actual } = readGoalFile(checkpoint);
    if (state.history.some((event) => event.request_id === requestId)) return state;
    if (expectedSha256 !== undefined && actual !== expectedSha256)
      throw refused(`checkpoint hash conflict: expected ${expectedSha256}, found ${actual}`);
    const updated = advanceCheckpoint(state, policy, requestId, secrets);
    writeFileAtomic(checkpoint, prettySortedJson(updated), { mode: 0o644, durable: true });
    return updated;
  });
}

/** Publishes a new goal checkpoint file (`create_file`): validated, never over an existing file. */
export function createGoalFile(path: string, state: GoalCheckpointInput): GoalCheckpointInput {
  const checkpoint = resolve(path);
  const validated = validateGoalCheckpoint(state);
  checkNoLinks(checkpoint);
  try {
    if (!lstatSync(dirname(checkpoint)).isDirectory()) throw new Error('ENOTDIR');
  } catch {
    throw refused(`the checkpoint's folder does not exist: ${dirname(checkpoint)}`);
  }
  return withLockFile(`${checkpoint}.lock`, () => {
    try {
      writeFileAtomic(checkpoint, prettySortedJson(validated), { mode: 0o644, durable: true, overwrite: false });
    } catch (error) {
      if (errorCode(error) === 'EEXIST') throw refused(`checkpoint already exists: ${checkpoint}`);
      throw error;
    }
    return validated;
  });
}

import { lstatSync, readFileSync, readdirSync } from 'node:fs';
import { basename, isAbsolute, join, relative } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import {
  ParTaskFileSchema,
  WorkspacePathSchema,
  firstIssue,
  invalidInput,
  isInvalidInput,
  type ParAction,
  type ParFiles,
  type ParTaskFile,
} from '@polish/protocol';
import { writeFileAtomic } from '../write-file-atomic.js';
import { parseStrictJson } from './strict-json.js';

/** Folders never part of the artifact: version control, polish's own state, dependencies. */
const SKIPPED = new Set(['.git', '.coord', 'node_modules']);
/** The artifact travels in task messages, so it must stay small. */
export const MAX_ARTIFACT_FILES = 500;
export const MAX_ARTIFACT_BYTES = 2 * 1024 * 1024;

/** Where a topic's files live in a workspace. */
export function coordPaths(workspace: string, topic: string) {
  const coord = join(workspace, '.coord');
  return {
    coord,
    task: join(coord, `par_${topic}.yml`),
    final: join(coord, `par_${topic}_final.md`),
    evidence: join(coord, 'evidence'),
  };
}

/** A file reference in a task file: relative to the workspace unless absolute. */
export const resolveRef = (workspace: string, ref: string) => (isAbsolute(ref) ? ref : join(workspace, ref));

/** Reads a text file, naming it (INVALID_INPUT, `cannot read …`) when it cannot be read. */
export function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw invalidInput(
      what,
      `cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
}

/** Reads a JSON file (policy, checkpoint), naming it when it is not JSON. */
export function readJsonFile(path: string, what: string): unknown {
  const text = readText(path, what);
  try {
    return parseStrictJson(text);
  } catch (error) {
    throw invalidInput(what, `${basename(path)} is not strict JSON (${(error as Error).message})`);
  }
}

export function readTaskFile(path: string): ParTaskFile {
  let document: unknown;
  try {
    document = parseYaml(readText(path, 'task file'));
  } catch (error) {
    if (isInvalidInput(error)) throw error;
    throw invalidInput('task file', `${path} is not valid YAML (${(error as Error).message})`);
  }
  const parsed = ParTaskFileSchema.safeParse(document);
  if (!parsed.success) {
    const issue = firstIssue(parsed.error);
    throw invalidInput('task file', `${path}: ${issue.path}: ${issue.message}`);
  }
  return parsed.data;
}

export function writeTaskFile(path: string, task: ParTaskFile): void {
  writeFileAtomic(
    path,
    `# polish plan-act-reflect task (schema_version 2); cycles are appended by polish\n${stringifyYaml(task, { lineWidth: 0 })}`,
  );
}

/**
 * The artifact: every text file of the workspace except `.git`, `.coord` and `node_modules`
 * (files containing NUL bytes are binary and left out). Refuses a workspace too big to send.
 */
export function readWorkspace(workspace: string): ParFiles {
  const files: ParFiles = {};
  let bytes = 0;
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (SKIPPED.has(entry.name)) continue;
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && !lstatSync(path).isSymbolicLink()) {
        const content = readFileSync(path);
        if (content.includes(0)) continue;
        bytes += content.length;
        const key = relative(workspace, path).split('\\').join('/');
        if (!WorkspacePathSchema.safeParse(key).success) continue;
        files[key] = content.toString('utf8');
        if (Object.keys(files).length > MAX_ARTIFACT_FILES || bytes > MAX_ARTIFACT_BYTES) {
          throw invalidInput(
            'workspace',
            `${workspace} has more than ${MAX_ARTIFACT_FILES} files or ${MAX_ARTIFACT_BYTES / 1024 / 1024} MB of text; run PAR in a smaller folder`,
          );
        }
      }
    }
  };
  walk(workspace);
  return files;
}

/** Refuses a path whose folders include a symbolic link: a write must not leave the workspace through one. */
function checkNoLinks(workspace: string, path: string): void {
  let folder = workspace;
  for (const part of path.split('/').slice(0, -1)) {
    folder = join(folder, part);
    let isLink = false;
    try {
      isLink = lstatSync(folder).isSymbolicLink();
    } catch {
      return; // Not there yet: it will be created as a real folder.
    }
    if (isLink)
      throw invalidInput(
        'change',
        `the agent's change to ${path} goes through a symbolic link (${relative(workspace, folder)}): refused`,
      );
  }
  try {
    if (lstatSync(join(workspace, path)).isSymbolicLink())
      throw invalidInput('change', `the agent's change to ${path} would replace a symbolic link: refused`);
  } catch (error) {
    if (isInvalidInput(error)) throw error;
  }
}

/** Applies an action's whole-file writes to the workspace, each file atomically, never through a symbolic link. */
export function writeChanges(workspace: string, changes: ParAction['changes']): void {
  for (const change of changes) checkNoLinks(workspace, change.path);
  for (const change of changes) writeFileAtomic(join(workspace, change.path), change.content);
}

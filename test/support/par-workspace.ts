import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { ParCheckpointSchema, ParTaskFileSchema } from '@polish/protocol';
import { polish, REPO } from './cli.js';

// A PAR workspace for end-to-end tests: the sample project (a failing test the agent must fix),
// a policy, a script for the scripted agent, and `polish par run|resume|decide` on it.

export const EXAMPLE = `${REPO}examples/par/`;
export const SECRET = 'an approver secret';
export const basePolicy = JSON.parse(readFileSync(`${EXAMPLE}policy.json`, 'utf8'));

export const BUGGY = 'function add(a, b) {\n  return a - b;\n}\nmodule.exports = { add };\n';
export const FIXED = 'function add(a, b) {\n  return a + b;\n}\nmodule.exports = { add };\n';
export const change = (content: string, passed = true) => ({
  changes: [{ path: 'add.js', content }],
  self_assessment: { passed, notes: 'done' },
});
export const plan = (summary: string) => ({ plan_summary: summary, action: summary });
/** A script whose reviewer has no answer for the task: every `--critique review` fails as an infrastructure error. */
export const REVIEWER_FAILS = {
  'par.plan': [{ answer: plan('add the operands') }],
  'par.act': [{ answer: change(FIXED) }],
  'par.review': [{ when: { artifact_contains: 'never' }, answer: {} }],
};

/** A workspace with the sample project, a policy, and a script for the agent. */
export function workspace(
  options: {
    limits?: Record<string, number>;
    script?: unknown;
    keyHashes?: Record<string, string>;
    /** The policy document written, from the v1 one (e.g. a v2 goal policy around it). */
    policy?: (v1: Record<string, unknown>) => unknown;
  } = {},
) {
  const directory = mkdtempSync(join(tmpdir(), 'polish-par-'));
  cpSync(`${EXAMPLE}project`, directory, { recursive: true });
  const policy = {
    ...basePolicy,
    limits: { ...basePolicy.limits, ...options.limits },
    human_authorization: { key_hashes: options.keyHashes ?? {} },
  };
  writeFileSync(join(directory, 'policy.json'), JSON.stringify(options.policy ? options.policy(policy) : policy));
  const script = join(directory, '..', `${directory.split('/').at(-1)}-script.yaml`);
  writeFileSync(
    script,
    options.script === undefined ? readFileSync(`${EXAMPLE}script.yaml`, 'utf8') : stringify(options.script),
  );
  const read = (path: string) => readFileSync(join(directory, path), 'utf8');
  return {
    directory,
    script,
    read,
    task: (topic = 't') => ParTaskFileSchema.parse(parse(read(`.coord/par_${topic}.yml`))),
    checkpoint: () => ParCheckpointSchema.parse(JSON.parse(read('.coord/task-checkpoint.json'))),
    /** The checkpoint file as it is (v1 or v2). */
    document: (path = '.coord/task-checkpoint.json') => JSON.parse(read(path)) as Record<string, unknown>,
  };
}

export type Workspace = ReturnType<typeof workspace>;
export const env = (keys?: Record<string, string>) => ({
  ...process.env,
  ...(keys ? { AGENT_COLLAB_HUMAN_KEYS_JSON: JSON.stringify(keys) } : {}),
});

/** The arguments of `polish par run` on a workspace; `critique` is its `--critique …` part. */
export function parRunArgs(options: {
  directory: string;
  critique: string[];
  topic?: string;
  goal?: string;
  acceptance?: string;
  policy?: string;
  /** The scripted agent's script; without it, the run uses the configured models. */
  script?: string;
}): string[] {
  return [
    'par',
    'run',
    '--topic',
    options.topic ?? 't',
    '--workspace',
    options.directory,
    '--goal',
    options.goal ?? 'make add() add',
    '--acceptance',
    options.acceptance ?? 'node test.js passes',
    ...options.critique,
    '--policy',
    options.policy ?? 'policy.json',
    ...(options.script === undefined ? [] : ['--script', options.script]),
  ];
}

/** `--critique command` running the sample project's test. */
export const COMMAND_CRITIQUE = ['--critique', 'command', '--command', 'node test.js'];

/** `polish par run` on a workspace with its script, as alice's approver keys allow, printing JSON. */
export function run(ws: Workspace, extra: string[] = [], critique: string[] = COMMAND_CRITIQUE, topic = 't') {
  return polish([...parRunArgs({ directory: ws.directory, critique, topic, script: ws.script }), '--json', ...extra], {
    env: env({ alice: SECRET }),
  });
}
export const resume = (ws: Workspace, keys: Record<string, string> = { alice: SECRET }, topic = 't') =>
  polish(['par', 'resume', '--topic', topic, '--workspace', ws.directory, '--script', ws.script, '--json'], {
    env: env(keys),
  });

/** `polish par decide` on a gate of a topic, signed with alice's key (or other secrets). */
export const decide = (
  directory: string,
  choice: '--approve' | '--decline' | '--revise',
  options: { gate?: string; topic?: string; keys?: Record<string, string>; rationale?: string } = {},
) =>
  polish(
    [
      'par',
      'decide',
      '--topic',
      options.topic ?? 't',
      '--workspace',
      directory,
      '--gate',
      options.gate ?? 'H1',
      choice,
      '--key-id',
      'alice',
      '--rationale',
      options.rationale ?? 'reviewed the diff',
    ],
    { env: env(options.keys ?? { alice: SECRET }) },
  );

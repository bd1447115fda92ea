import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunResultSchema } from '@polish/protocol';
import { spawnSync } from 'node:child_process';
import { POLISH, polish } from './support/cli.js';
import { demoRunArgs } from './support/demo.js';

const demo = 'examples/demo';
const goal = readFileSync(`${demo}/goal.txt`, 'utf8').trim();
const scratch = () => mkdtempSync(join(tmpdir(), 'polish-cli-'));

describe('Node version', () => {
  it('runs on Node 22 or newer (the tests, and so the processes they start with process.execPath)', () => {
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(22);
  });

  it('refuses an older Node with one line and exit 6 before loading anything', () => {
    // The same binary, told it is Node 20 before the entry runs: the entry must check the version itself.
    const pretend = `Object.defineProperty(process.versions, 'node', { value: '20.20.2' })`;
    const outcome = spawnSync(process.execPath, ['--import', `data:text/javascript,${pretend}`, POLISH, 'demo'], {
      encoding: 'utf8',
    });
    expect(outcome.status).toBe(6);
    expect(outcome.stderr).toBe(
      'polish needs Node.js 22 or newer (24 recommended); this is v20.20.2. Run scripts/setup.sh or install Node 24.\n',
    );
    expect(outcome.stdout).toBe('');
  });
});

describe('polish demo', () => {
  it('shows per-wave progress, says the model is scripted, and converges at iteration 3', async () => {
    const { code, stdout, stderr } = await polish(['demo']);
    expect(code).toBe(0);
    expect(stderr).toContain('the model is SCRIPTED');
    expect(stderr).toContain('criteria locked (extracted by wave 1)');
    expect(stderr).toContain('iteration 1: 1/3 pass');
    expect(stderr).toContain('iteration 2: 2/3 pass');
    expect(stderr).toContain('iteration 3: 3/3 pass');
    expect(stderr).toContain('polish: CONVERGED after 3 iterations');
    expect(stdout).toContain('Retry-After');
  });
});

describe('polish run', () => {
  it('ends CAP_REACHED with exit 3, the best version and its remaining gaps in --json', async () => {
    const { code, stdout, stderr } = await polish([
      'run',
      `${demo}/artifact.md`,
      '--goal',
      goal,
      '--cap',
      '2',
      '--script',
      `${demo}/script-stubborn.yaml`,
      '--json',
    ]);
    expect(code).toBe(3);
    const result = RunResultSchema.parse(JSON.parse(stdout));
    expect(result.status).toBe('CAP_REACHED');
    if (result.status !== 'CAP_REACHED') return;
    expect(result.iterations).toBe(2);
    expect(result.best_iteration).toBe(2);
    expect(result.artifact).toContain('429 Too Many Requests');
    expect(result.remaining_gaps).toEqual([expect.stringMatching(/^C3: Nothing says how long to wait/)]);
    expect(result.models.every((model) => model.scripted)).toBe(true);
    expect(stderr).toContain('remaining gaps');
  });

  it('reads the artifact from standard input and writes the final artifact to --out', async () => {
    const directory = scratch();
    const out = join(directory, 'final.md');
    const { code, stdout } = await polish(demoRunArgs(['--script', `${demo}/script.yaml`, '--out', out], '-'), {
      input: readFileSync(`${demo}/artifact.md`, 'utf8'),
    });
    expect(code).toBe(0);
    expect(stdout).toBe('');
    expect(readFileSync(out, 'utf8')).toContain('Retry-After');
  });

  it('exits 4 with the reason when the model breaks the contract after repair', async () => {
    const directory = scratch();
    const script = join(directory, 'broken.yaml');
    writeFileSync(script, 'evaluate:\n  - answer: "I think it is fine."\n');
    const out = join(directory, 'out.md');
    const { code, stderr } = await polish(demoRunArgs(['--script', script, '--out', out]));
    expect(code).toBe(4);
    expect(stderr).toContain('polish: FAILED: evaluate answer still invalid after 2 repairs: the answer is not JSON');
    expect(existsSync(out)).toBe(false);
  });
});

describe('bad input: one line naming the field, exit 2, nothing written', () => {
  const directory = scratch();
  const file = (name: string, text: string) => {
    const path = join(directory, name);
    writeFileSync(path, text);
    return path;
  };
  const artifact = `${demo}/artifact.md`;
  const script = `${demo}/script.yaml`;
  /** `polish run` with these arguments, the demo's script, then `flags` (a later flag overrides an earlier one). */
  const runScripted = (args: string[], flags: string[] = []) => polish(['run', ...args, '--script', script, ...flags]);
  const criteria = (list: unknown) =>
    file(`criteria-${Math.random().toString(36).slice(2)}.json`, JSON.stringify(list));
  const nine = Array.from({ length: 9 }, (_, i) => ({ id: `C${i + 1}`, text: 'x' }));

  it.each([
    ['cap 0', ['--cap', '0'], 'cap: must be at least 1'],
    ['cap 9', ['--cap', '9'], 'cap: must be at most 8'],
    ['cap "x"', ['--cap', 'x'], 'cap: must be a whole number from 1 to 8, got "x"'],
    ['pass_0', ['--threshold', 'pass_0'], 'threshold: pass_N needs N of at least 1'],
    [
      'pass_N above the criteria',
      ['--threshold', 'pass_4', '--criteria', `${demo}/criteria.json`],
      'threshold: pass_4 needs 4 criteria but only 3 are given',
    ],
    ['a bad threshold', ['--threshold', 'most'], 'threshold: must be pass_all or pass_N'],
    ['criteria not JSON', ['--criteria', file('bad.json', '{ nope')], 'criteria: '],
    ['zero criteria', ['--criteria', criteria([])], 'criteria: at least 1 criterion is needed'],
    ['nine criteria', ['--criteria', criteria(nine)], 'criteria: at most 8 criteria are allowed'],
    [
      'duplicate ids',
      [
        '--criteria',
        criteria([
          { id: 'C1', text: 'a' },
          { id: 'C1', text: 'b' },
        ]),
      ],
      'criteria[1].id: duplicate criterion id C1',
    ],
    ['empty criterion text', ['--criteria', criteria([{ id: 'C1', text: '' }])], 'criteria[0].text: must not be empty'],
    ['an unreadable criteria file', ['--criteria', join(directory, 'missing.json')], 'criteria: cannot read'],
    ['an unreadable script', ['--script', join(directory, 'missing.yaml')], 'script: cannot read'],
    [
      'a task timeout that overflows timers',
      ['--task-timeout', '1e9'],
      'task-timeout: must be a number of seconds from 0.01 to 86400',
    ],
    [
      'a task timeout of zero',
      ['--task-timeout', '0.0001'],
      'task-timeout: must be a number of seconds from 0.01 to 86400',
    ],
    ['an unreachable threshold', ['--threshold', 'pass_9'], 'threshold: pass_9 can never be met'],
  ])('%s', async (_name, flags, message) => {
    const out = join(directory, 'out.md');
    const { code, stderr, stdout } = await runScripted([artifact, '--goal', 'g'], ['--out', out, ...flags]);
    expect(code).toBe(2);
    expect(stderr).toContain(`polish: invalid input: ${message}`);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stdout).toBe('');
    expect(existsSync(out)).toBe(false);
  });

  it.each([
    ['a pool of 0', ['--pool', '0'], 'pool: must be a whole number from 1 to 64, got "0"'],
    ['a successor quiet time in seconds', ['--successor-quiet', '0.5'], 'successor-quiet: must be a whole number'],
    ['a successor quiet time past a minute', ['--successor-quiet', '60001'], 'successor-quiet: must be a whole number'],
    ['no boots at once', ['--boot-concurrency', '0'], 'boot-concurrency: must be a whole number from 1'],
  ])('polish worker refuses %s before connecting', async (_name, flags, message) => {
    // Port 1 answers nobody: an error about the flag proves it was read before any connection.
    const { code, stderr } = await polish(['worker', '--nats', 'nats://127.0.0.1:1', '--script', script, ...flags]);
    expect(code).toBe(2);
    expect(stderr).toContain(`polish: invalid input: ${message}`);
    expect(stderr.trim().split('\n')).toHaveLength(1);
  });

  it.each([
    ['an empty artifact', [file('empty.md', ' \n\n'), '--goal', 'g'], 'artifact: must not be empty'],
    ['an unreadable artifact', [join(directory, 'nope.md'), '--goal', 'g'], 'artifact: cannot read'],
    ['a missing goal', [artifact], 'goal: required'],
    ['an empty goal', [artifact, '--goal', ' '], 'goal: required'],
  ])('%s', async (_name, args, message) => {
    const { code, stderr } = await runScripted(args);
    expect(code).toBe(2);
    expect(stderr).toContain(`polish: invalid input: ${message}`);
  });

  it.each([
    ['a folder that does not exist', () => join(directory, 'no-such-folder', 'out.md'), 'out: cannot write in'],
    ['a directory', () => directory, 'out: '],
  ])('an --out in %s is refused before the run', async (_name, out, message) => {
    const { code, stderr } = await runScripted([artifact, '--goal', 'g'], ['--out', out()]);
    expect(code).toBe(2);
    expect(stderr).toContain(`polish: invalid input: ${message}`);
    expect(stderr).not.toContain('started nats-server');
  });

  it('leaves no file behind in the output folder', () => {
    expect(readdirSync(directory).filter((name) => name.startsWith('out') || name.endsWith('.tmp'))).toEqual([]);
  });
});

// polish as an installed product: the README's install commands, run word for word, pack this
// checkout and install the tarballs with plain npm into an empty project outside it; the
// installed `polish` and the installed library API must then work from there alone.
// One install serves every case (beforeAll); the whole file takes about a minute and a half.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from './support/cli.js';
import { startNats, type NatsFixture } from './support/nats.js';
import { commandLineOf, watchProcess, type WatchedProcess } from './support/processes.js';
import { startFakeModelServer } from './support/fake-model-server.js';
import { anthropicDialect } from './support/fake-anthropic.js';
import { fakeAnswer, roleOf } from './support/fake-llm.js';
import { anthropicSystem, anthropicUser } from './support/sdk-requests.js';

const PACKAGES = ['protocol', 'orchestrator', 'agents', 'inspector', 'cli'];

/** The fenced block that follows `<!-- name … -->` in README.md: what the README tells people to type. */
function readmeBlock(name: string): string {
  const readme = readFileSync(`${REPO}README.md`, 'utf8');
  const block = new RegExp(`<!-- ${name}\\b[^>]*-->\\s*\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(readme);
  if (!block?.[1]) throw new Error(`README.md has no \`\`\`sh block after <!-- ${name} -->`);
  return block[1];
}

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Every process group started here, so none outlives the file (npx starts polish, polish its workers). */
const groups = new Set<ChildProcess>();

function start(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): ChildProcess {
  // Its own process group: stopping it stops npx, the polish under it and that polish's children.
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  groups.add(child);
  child.once('exit', () => groups.delete(child));
  return child;
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Outcome> {
  const child = start(command, args, cwd, env);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs and expects exit 0, showing everything the command printed when it is not. */
async function succeed(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Outcome> {
  const outcome = await run(command, args, cwd, env);
  expect(outcome.code, `${command} ${args.join(' ')}:\n${outcome.stdout}\n${outcome.stderr}`).toBe(0);
  return outcome;
}

async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  process.kill(-child.pid!, 'SIGTERM');
  await exited;
}

/** A manifest as packed in a tarball. */
function packedManifest(tarball: string): Record<string, Record<string, string> | string> {
  return JSON.parse(
    readFileSync(join(scratch, 'unpacked', tarball.replace(/\.tgz$/, ''), 'package', 'package.json'), 'utf8'),
  );
}

const scratch = mkdtempSync(join(tmpdir(), 'polish-install-'));
/** The empty project polish is installed into: outside the checkout, so nothing can resolve back into it. */
const project = join(scratch, 'project');
const globalPrefix = join(scratch, 'npm-global');
const env: NodeJS.ProcessEnv = {
  ...process.env,
  // The suite built the checkout; pack:all must not rebuild it under other tests' workers.
  POLISH_BUILT: '1',
  PROJECT: project,
  // `npm install -g` of the README goes here, and its `polish` is on PATH.
  npm_config_prefix: globalPrefix,
  PATH: `${globalPrefix}/bin:${process.env.PATH}`,
  // From npm's cache when it has the dependencies; the registry only for what is missing.
  npm_config_prefer_offline: 'true',
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
  // The demo's embedded nats-server stores under here, not in the home folder.
  XDG_STATE_HOME: join(scratch, 'state'),
};
// The demo must start its own nats-server, not use one from the environment.
delete env.NATS_URL;

let installed: Outcome;
let nats: NatsFixture | undefined;

beforeAll(async () => {
  cpSync(`${REPO}examples/library`, project, { recursive: true });
  // What a new project starts with (the README: `npm init -y` in an empty folder).
  await succeed('npm', ['init', '-y'], project, env);
  const script = ['set -eu', readmeBlock('install-from-tarballs'), readmeBlock('install-global')].join('\n');
  installed = await run('bash', ['-c', script], REPO, env);
  nats = await startNats();
}, 600_000);

afterAll(async () => {
  await Promise.all([...groups].map(stopGroup));
  await nats?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

describe('polish installed from its tarballs with npm, outside the checkout', () => {
  it('runs the README install commands word for word: both demos converge from the installed files', () => {
    expect(installed.code, `${installed.stdout}\n${installed.stderr}`).toBe(0);
    // Once from the project (`npx polish demo`), once from the global install (`polish demo`),
    // each with the demo's files of its own installed package.
    const scripts = [...installed.stderr.matchAll(/Every answer comes from (\S+), not an LLM/g)].map((m) => m[1]);
    expect(scripts).toEqual([
      join(project, 'node_modules/@polish/cli/dist/demo/script.yaml'),
      join(globalPrefix, 'lib/node_modules/@polish/cli/dist/demo/script.yaml'),
    ]);
    expect(installed.stderr.match(/polish: CONVERGED after 3 iterations/g)).toHaveLength(2);
    expect(installed.stdout).toContain('Retry-After');
  });

  it('packs every package with its README and LICENSE, real versions for workspace:*, engines and types', async () => {
    const tarballs = readdirSync(`${REPO}dist-packages`).sort();
    expect(tarballs).toEqual(PACKAGES.map((name) => `polish-${name}-0.1.0.tgz`).sort());
    for (const tarball of tarballs) {
      const into = join(scratch, 'unpacked', tarball.replace(/\.tgz$/, ''));
      cpSync(`${REPO}dist-packages/${tarball}`, `${into}.tgz`);
      await succeed('mkdir', ['-p', into], scratch, env);
      await succeed('tar', ['xzf', `${into}.tgz`, '-C', into], scratch, env);
      const files = readdirSync(join(into, 'package'));
      expect(files, tarball).toEqual(expect.arrayContaining(['README.md', 'LICENSE', 'package.json', 'dist']));
      expect(readFileSync(join(into, 'package', 'LICENSE'), 'utf8')).toBe(readFileSync(`${REPO}LICENSE`, 'utf8'));
      const manifest = packedManifest(tarball);
      expect(JSON.stringify(manifest), tarball).not.toContain('workspace:');
      expect(manifest.engines).toEqual({ node: '>=22' });
      expect((manifest.exports as unknown as Record<string, { types: string }>)['.']?.types).toBe('./dist/index.d.ts');
      for (const [name, range] of Object.entries(manifest.dependencies ?? {}))
        if (name.startsWith('@polish/')) expect(range, `${tarball}: ${name}`).toBe('0.1.0');
    }
    expect(packedManifest('polish-cli-0.1.0.tgz').bin).toEqual({ polish: './dist/bin.js' });
  });

  it('resolves the JSON Schema files inside the installed protocol package', async () => {
    const { stdout } = await succeed(
      'node',
      [
        '--input-type=module',
        '-e',
        "console.log(import.meta.resolve('@polish/protocol/schema/task-envelope.schema.json'))",
      ],
      project,
      env,
    );
    expect(stdout.trim()).toBe(`file://${project}/node_modules/@polish/protocol/schema/task-envelope.schema.json`);
  });

  it('type-checks the library example against the installed types and runs it in process and over NATS', async () => {
    // What the example itself needs besides polish: TypeScript, Node's types and the NATS client
    // (the checkout's versions, so npm's cache usually has them).
    const version = (name: string) =>
      (JSON.parse(readFileSync(`${REPO}node_modules/${name}/package.json`, 'utf8')) as { version: string }).version;
    const natsClient = JSON.parse(readFileSync(`${REPO}packages/orchestrator/package.json`, 'utf8')).dependencies[
      '@nats-io/transport-node'
    ] as string;
    await succeed(
      'npm',
      [
        'install',
        '--save-dev',
        `typescript@${version('typescript')}`,
        `@types/node@${version('@types/node')}`,
        `@nats-io/transport-node@${natsClient}`,
      ],
      project,
      env,
    );
    await succeed('npx', ['tsc', '-p', '.'], project, env);

    const inProcess = await succeed('node', ['polish-library.mjs'], project, env);
    expect(inProcess.stdout).toBe('in process: CONVERGED after 2 iterations: "Hello, world.\\n"\n');

    const worker = watchProcess(
      start('npx', ['polish', 'worker', '--nats', nats!.server.url, '--script', 'script.yaml'], project, env),
      { describe: 'npx polish worker' },
    );
    await worker.waitFor(/all pools ready/);
    // Its worker processes start from the installed @polish/agents (its snapshot or its bundle), not the checkout.
    const pid = (await worker.waitFor(/^worker (\d+) \(evaluate\) ready/))[1];
    const installed = join(project, 'node_modules/@polish/agents/dist/');
    const entry = commandLineOf(Number(pid)).filter((arg) =>
      /worker-snapshot\/worker\.blob$|worker-bundle\/worker-entry\.mjs$/.test(arg),
    );
    // A worker restored from the snapshot names the blob and, as its script, the bundle's entry.
    const bundled = `${installed}worker-bundle/worker-entry.mjs`;
    expect([[bundled], [`${installed}worker-snapshot/worker.blob`, bundled]]).toContainEqual(entry);
    const overNats = await succeed('node', ['polish-library.mjs', nats!.server.url], project, env);
    expect(overNats.stdout).toBe('over NATS: CONVERGED after 2 iterations: "Hello, world.\\n"\n');
    // The answers came from the installed `polish worker`'s processes.
    expect(worker.lines.some((line) => /^worker \d+ \(evaluate\) started/.test(line))).toBe(true);
    await stopGroup(worker.child);
  }, 180_000);

  it('runs a model SDK in the installed worker: restored from its snapshot, the SDK from the build beside it', async () => {
    const claude = await startFakeModelServer(anthropicDialect, (request) => ({
      answer: fakeAnswer(roleOf(anthropicSystem(request)), anthropicUser(request)),
    }));
    const artifact = join(project, 'limits.md');
    writeFileSync(artifact, '# Limits\nversion 1 of the rate limit page.\n');
    const worker = watchProcess(
      start(
        'npx',
        ['polish', 'worker', '--nats', nats!.server.url, '--model', `anthropic:claude-test@${claude.url}`],
        project,
        { ...env, ANTHROPIC_API_KEY: 'sk-ant-install-test' },
      ),
      { describe: 'npx polish worker (Anthropic)' },
    );
    try {
      await worker.waitFor(/all pools ready/);
      const run = await succeed(
        'npx',
        ['polish', 'run', artifact, '--goal', 'Document the rate limiter.', '--nats', nats!.server.url, '--json'],
        project,
        env,
      );
      expect(JSON.parse(run.stdout)).toMatchObject({ status: 'CONVERGED' });
      expect(claude.requests.length).toBeGreaterThan(0);
      // Every worker that answered was restored from the installed package's snapshot.
      const started = worker.lines.filter((line) => /^worker \d+ \(\w+\) started from /.test(line));
      expect(started.length).toBeGreaterThan(0);
      for (const line of started) expect(line).toContain('started from the startup snapshot');
      const pid = Number(/^worker (\d+)/.exec(started.at(-1) ?? '')?.[1]);
      expect(commandLineOf(pid)).toContain(
        join(project, 'node_modules/@polish/agents/dist/worker-snapshot/worker.blob'),
      );
    } finally {
      await stopGroup(worker.child);
      await claude.stop();
    }
  }, 180_000);

  it('serves the inspector page of the installed polish inspect', async () => {
    const inspect: WatchedProcess = watchProcess(
      start('npx', ['polish', 'inspect', '--nats', nats!.server.url, '--port', '0'], project, env),
      { describe: 'npx polish inspect' },
    );
    // It prints the page's address on standard output once it serves.
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      inspect.child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const printed = /^(http:\/\/\S+)\n/m.exec(out);
        if (printed?.[1]) resolve(printed[1]);
      });
      void inspect.exited.then(() => reject(new Error(`polish inspect exited:\n${inspect.lines.join('\n')}`)));
    });
    const page = await fetch(url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const html = await page.text();
    expect(html).toBe(readFileSync(`${REPO}packages/inspector/static/index.html`, 'utf8'));
    const script = await fetch(new URL('/app.js', url));
    expect(script.status).toBe(200);
    await stopGroup(inspect.child);
  });
});

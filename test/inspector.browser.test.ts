import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startNats, type NatsFixture } from './support/nats.js';
import { request as httpRequest } from 'node:http';
import { loadScriptFile } from '@polish/agents';
import { startHost, startPolish, stop, workerArgs, type WatchedProcess } from './support/processes.js';
import { REPO } from './support/cli.js';
import {
  LONG_CRITERIA,
  STATUS_SENTENCE,
  closedInFull,
  closingEdits,
  longArtifact,
  longScores,
} from './support/long-artifact.js';
import { COMMAND_CRITIQUE, parRunArgs } from './support/par-workspace.js';

// The inspector in a real browser (Debian's chromium driven by playwright-core; never a browser
// download): a real nats-server, `polish inspect`, `polish worker` hosts and `polish run` /
// `polish par run` as separate processes, all on loopback.

const demo = `${REPO}examples/demo`;
const scratch = mkdtempSync(join(tmpdir(), 'polish-inspector-'));
// The artifact carries markup that must stay text: were it rendered, these would set the flag.
const HOSTILE = '\n<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">\n';
const BROWSER_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

let nats: NatsFixture;
let inspector: WatchedProcess;
let url: string;
let browser: Browser;
const started: WatchedProcess[] = [];

beforeAll(async () => {
  nats = await startNats();
  inspector = startPolish(['inspect', '--nats', nats.server.url, '--port', '0']);
  url = (await inspector.waitFor(/inspector on (http:\/\/127\.0\.0\.1:\d+\/)/))[1] ?? '';
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: BROWSER_FLAGS });
});

afterAll(async () => {
  await browser?.close();
  for (const process_ of started) await stop(process_);
  if (inspector) await stop(inspector);
  await nats?.stop();
});

/** A page on the inspector that records every request it makes. */
async function openPage(): Promise<{ page: Page; requests: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1800 } });
  const requests: string[] = [];
  page.on('request', (request) => requests.push(request.url()));
  await page.goto(url);
  return { page, requests };
}

describe('polish inspect, in a browser', () => {
  it('shows a polish run live: statechart, messages, grid, diff; replays it; and keeps a <script> artifact inert', async () => {
    // Each iteration's evaluation waits for its own release file, so the test sees the run step by step.
    const source = loadScriptFile(`${demo}/script.yaml`);
    const release = (iteration: number) => writeFileSync(join(scratch, `release-${iteration}`), '');
    const evaluate = source.evaluate?.map((rule, index, rules) => ({
      ...rule,
      hold_until_file: join(scratch, `release-${rules.length - index}`),
    }));
    const script = join(scratch, 'stepwise.json');
    writeFileSync(script, JSON.stringify({ ...source, evaluate }));
    const host = await startHost(nats.server.url, ['--pool', '2', '--script', script]);
    started.push(host);
    const artifact = join(scratch, 'artifact.md');
    writeFileSync(artifact, `${readFileSync(`${demo}/artifact.md`, 'utf8')}${HOSTILE}`);
    const inspectEvents: string[] = [];
    const feed = nats.connection.subscribe('polish.v1.inspect.>', {
      callback: (_error, message) => void inspectEvents.push((message.json() as { type: string }).type),
    });

    const { page, requests } = await openPage();
    const run = startPolish([
      'run',
      artifact,
      '--goal',
      readFileSync(`${demo}/goal.txt`, 'utf8').trim(),
      '--nats',
      nats.server.url,
      '--local',
      '--json',
    ]);
    started.push(run);

    // The run appears, and the statechart lights the state it is in: wave 2 waits on the held evaluator.
    await page.locator('[data-testid=runs] li').first().waitFor();
    await page.locator('g[data-state="evaluating"][data-active="true"]').waitFor();
    expect(await page.locator('[data-testid=run-status]').textContent()).toBe('RUNNING');
    await page.locator('[data-testid=timeline] tr[data-role="evaluate"]').first().waitFor();
    // The task queue: the held evaluation is in a worker's hands, in the timeline and in the queue panel.
    await page.locator('[data-testid=timeline] tr[data-role="evaluate"] td', { hasText: 'working…' }).first().waitFor();
    await page.waitForFunction(
      () =>
        document.querySelector('[data-testid=queues] tr[data-role="evaluate"] td:nth-child(5)')?.textContent === '1',
    );

    expect(await page.locator('[data-testid=grid] th').count()).toBe(1); // no iteration evaluated yet

    // Released one iteration at a time: the grid fills in and the statechart moves on each time.
    for (const iteration of [1, 2]) {
      release(iteration);
      await page.locator('[data-testid=grid] th', { hasText: `iteration ${iteration}` }).waitFor();
      expect(await page.locator('[data-testid=grid] th').count()).toBe(iteration + 1);
      await page.locator('g[data-state="evaluating"][data-active="true"]').waitFor();
      // The next evaluation has been sent (and is held): the timeline shows it waiting.
      await page.waitForFunction(
        (count) => document.querySelectorAll('[data-testid=timeline] tr[data-role="evaluate"]').length === count,
        iteration + 1,
      );
    }
    release(3);
    expect((await run.exited).code).toBe(0);
    await page.locator('[data-testid=run-status]', { hasText: 'CONVERGED' }).waitFor();
    await page.locator('g[data-state="converged"][data-active="true"]').waitFor();
    expect(await page.locator('path.edge.taken').count()).toBeGreaterThan(2);
    expect(await page.locator('[data-testid=grid] th').count()).toBe(4); // criterion + 3 iterations
    const failing = page.locator('[data-testid=grid] td.fail').first();
    expect(await failing.getAttribute('title')).toMatch(/\S/); // the gap, on hover
    expect(await page.locator('[data-testid=grid] tr[data-criterion] td.pass').count()).toBeGreaterThan(0);

    // The diff view shows the revision between iterations.
    await page.locator('[data-testid=version-tabs] button[data-version="1"]').click();
    expect(await page.locator('[data-testid=diff] span.added').count()).toBeGreaterThan(0);
    // The first version has nothing to diff against and is shown whole (issue 22): as text too.
    await page.locator('[data-testid=version-tabs] button[data-version="0"]').click();
    expect(await page.locator('[data-testid=diff] span').count()).toBe(0);
    expect(await page.locator('[data-testid=diff]').textContent()).toContain(HOSTILE.trim());
    expect(await page.locator('main script, main img').count()).toBe(0);
    await page.locator('[data-testid=version-tabs] button[data-version="1"]').click();

    // A message on the timeline shows what the evaluator received: the artifact and the criteria.
    await page.locator('[data-testid=timeline] tr[data-role="evaluate"]').first().click();
    const payload = await page.locator('[data-testid=message-payload]').textContent();
    expect(payload).toContain('"criteria"');
    expect(payload).toContain('window.__pwned');

    // The hostile markup is shown as text and never runs or renders.
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('main script, main img').count()).toBe(0);
    expect(await page.locator('[data-testid=diff]').textContent()).toContain('<script>window.__pwned = 1</script>');

    // A finished run replays step by step from its stored events.
    await page.locator('[data-testid=replay-slider]').fill('4');
    await page.locator('[data-testid=replay-label]', { hasText: 'event 4 of' }).waitFor();
    expect(await page.locator('[data-testid=final]').textContent()).toBe('still running');
    expect(await page.locator('[data-testid=grid] td.pass, [data-testid=grid] td.fail').count()).toBe(0);
    expect(await page.locator('g[data-active="true"]').count()).toBe(1);
    const early = await page.locator('g[data-active="true"]').getAttribute('data-state');
    await page.locator('[data-testid=replay-next]').click();
    await page.locator('[data-testid=replay-label]', { hasText: 'event 5 of' }).waitFor();
    await page.locator('[data-testid=replay-live]').click();
    await page.locator('[data-testid=final]', { hasText: 'CONVERGED' }).waitFor();
    expect(early).not.toBe('converged');

    // Nothing on the page reached outside the inspector.
    expect(requests.every((request) => request.startsWith(url))).toBe(true);
    // The run's actors also reported in the @statelyai/inspect format.
    await nats.connection.flush();
    feed.unsubscribe();
    expect(new Set(inspectEvents)).toEqual(new Set(['@xstate.actor', '@xstate.event', '@xstate.snapshot']));
    await page.close();
  });

  it('shows a quorum’s judges side by side with their quotes, and a revision’s edits above its diff', async () => {
    const long = longArtifact();
    const script = join(scratch, 'long.json');
    writeFileSync(
      script,
      JSON.stringify({
        name: 'long',
        evaluate: [
          { when: { artifact_contains: 'status 429' }, answer: longScores(closedInFull(long)) },
          { answer: longScores(long) },
        ],
        revise: [{ answer: { edits: closingEdits(long) } }],
      }),
    );
    const judge = (name: string) => {
      const path = join(scratch, `${name}.json`);
      writeFileSync(path, JSON.stringify({ name, evaluate: JSON.parse(readFileSync(script, 'utf8')).evaluate }));
      return `scripted:${path}`;
    };
    const artifact = join(scratch, 'long.md');
    writeFileSync(artifact, long);
    const criteria = join(scratch, 'long-criteria.json');
    writeFileSync(criteria, JSON.stringify(LONG_CRITERIA));
    // Embedded: each judge on its own workers with its own (scripted) model; the page stays on after the run.
    const run = startPolish([
      'run',
      artifact,
      '--goal',
      'Document the traffic limits.',
      '--criteria',
      criteria,
      '--script',
      script,
      '--evaluators',
      [judge('judge-a'), judge('judge-b'), judge('judge-c')].join(','),
      '--revise-mode',
      'edits',
      '--inspect',
      '--inspect-port',
      '0',
      '--state-dir',
      join(scratch, 'state'),
    ]);
    started.push(run);
    const runUrl = (await run.waitFor(/inspector: open (http:\/\/127\.0\.0\.1:\d+\/)/))[1] ?? '';
    await run.waitFor(/the inspector stays on/, 60_000);
    const page = await browser.newPage({ viewport: { width: 1400, height: 1800 } });
    await page.goto(runUrl);
    await page.locator('[data-testid=run-status]', { hasText: 'CONVERGED' }).waitFor();
    // Each criterion, each iteration: the verdict, and the three judges' scores beside it.
    const cell = page.locator('[data-testid=grid] tr[data-criterion="C2"] td[data-iteration="1"]');
    expect(await cell.getAttribute('data-verdict')).toBe('fail');
    expect(await cell.locator('[data-testid=judges] span').allTextContents()).toEqual(['J1 ✗', 'J2 ✗', 'J3 ✗']);
    expect(await cell.locator('[data-testid=judges] span').last().getAttribute('title')).toContain('judge-c');
    const passing = page.locator('[data-testid=grid] tr[data-criterion="C2"] td[data-iteration="2"]');
    expect(await passing.getAttribute('title')).toBe(`quote: “${STATUS_SENTENCE}”`);
    expect(await passing.locator('[data-testid=judges] span').first().getAttribute('title')).toContain(STATUS_SENTENCE);
    // The version the revision made: its edits, each with the criterion it claims, above the diff.
    await page.locator('[data-testid=version-tabs] button[data-version="1"]').click();
    expect(await page.locator('[data-testid=revision]').textContent()).toContain('Revised by 2 edits closing C1, C2');
    expect(
      await page
        .locator('[data-testid=edits] li')
        .evaluateAll((items) => items.map((item) => item.getAttribute('data-criterion'))),
    ).toEqual(['C1', 'C2']);
    await page.close();
    run.child.kill('SIGINT');
    expect((await run.exited).code).toBe(0);
  });

  it('shows a PAR run: cycles, evidence and each policy decision with its reasons', async () => {
    const host = await startHost(
      nats.server.url,
      workerArgs({ roles: ['par.plan', 'par.act', 'par.command'], pool: 1, script: `${REPO}examples/par/script.yaml` }),
    );
    started.push(host);
    const workspace = mkdtempSync(join(tmpdir(), 'polish-inspector-par-'));
    cpSync(`${REPO}examples/par/project`, workspace, { recursive: true });
    const { page } = await openPage();
    const run = startPolish([
      ...parRunArgs({
        directory: workspace,
        topic: 'fix-add',
        critique: COMMAND_CRITIQUE,
        policy: `${REPO}examples/par/policy.json`,
      }),
      '--nats',
      nats.server.url,
    ]);
    started.push(run);
    expect((await run.exited).code).toBe(0);
    await page.locator('[data-testid=runs] li', { hasText: 'PAR fix-add' }).click();
    await page.locator('[data-testid=run-status]', { hasText: 'PASS' }).waitFor();
    expect(await page.locator('[data-testid=cycles] tr[data-cycle]').count()).toBe(2);
    expect(await page.locator('[data-testid=cycles] tr[data-cycle="1"]').textContent()).toContain(
      'FAIL add(2, 3) returned 1, expected 5',
    );
    expect(await page.locator('[data-testid=cycles] tr[data-cycle="2"]').textContent()).toContain(
      '.coord/evidence/command-',
    );
    const decisions = await page.locator('[data-testid=decisions] li').allTextContents();
    expect(decisions.at(-1)).toBe('stop: task_status:completed');
    expect(decisions.slice(0, -1).every((decision) => decision === 'continue')).toBe(true);
    await page.locator('g[data-state="passed"][data-active="true"]').waitFor();
    await page.locator('[data-testid=version-tabs] button').last().click();
    expect((await page.locator('[data-testid=diff] span.added').allTextContents()).join('')).toContain('return a + b');
    if (process.env.POLISH_SCREENSHOTS)
      await page.screenshot({ path: join(REPO, 'docs', 'inspector-par-run.png'), fullPage: true });
    await page.close();
  });

  it('answers a malformed request with 400 and a foreign Host with 403, and keeps serving', async () => {
    const status = (path: string, host: string) =>
      new Promise<number>((resolve, reject) => {
        const target = new URL(url);
        const request = httpRequest(
          { host: target.hostname, port: target.port, path, headers: { host } },
          (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          },
        );
        request.on('error', reject);
        request.end();
      });
    expect(await status('/api/runs/%E0%A4%A', `127.0.0.1:${new URL(url).port}`)).toBe(400);
    expect(await status('/api/runs', 'attacker.example')).toBe(403);
    expect(await status('/api/runs', `localhost:${new URL(url).port}`)).toBe(200);
  });

  it('polish demo --inspect: starts when the page opens, converges in the browser, and serves until Ctrl-C', async () => {
    const demoRun = startPolish(['demo', '--inspect', '--inspect-port', '0', '--state-dir', join(scratch, 'state')]);
    started.push(demoRun);
    const page = await browser.newPage();
    await page.goto((await demoRun.waitFor(/inspector: open (http:\/\/127\.0\.0\.1:\d+\/)/))[1] ?? '');
    await page.locator('[data-testid=run-status]', { hasText: 'CONVERGED' }).waitFor({ timeout: 30_000 });
    expect(await page.locator('[data-testid=grid] th').count()).toBe(4);
    if (process.env.POLISH_SCREENSHOTS)
      await page.screenshot({ path: join(REPO, 'docs', 'inspector-polish-run.png'), fullPage: true });
    await demoRun.waitFor(/the inspector stays on/);
    demoRun.child.kill('SIGINT');
    expect((await demoRun.exited).code).toBe(0);
    await page.close();
  });
});

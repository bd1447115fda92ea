import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentHost } from '@polish/agents';
import { createNatsDispatcher } from '@polish/orchestrator';
import { startNats, type NatsFixture } from './support/nats.js';
import { REPO } from './support/cli.js';

const model = { provider: 'scripted' as const, script: `${REPO}examples/demo/script.yaml` };
const criteria = JSON.parse(readFileSync(`${REPO}examples/demo/criteria.json`, 'utf8'));

describe('agent host', () => {
  let nats: NatsFixture;
  beforeAll(async () => {
    nats = await startNats();
  });
  afterAll(async () => {
    await nats.stop();
  });

  it('stops promptly when SIGTERM reaches workers mid-boot (connecting, warming up), leaving none behind', async () => {
    const host = createAgentHost({ natsUrl: nats.server.url, roles: ['evaluate', 'revise'], pool: 2, bootConcurrency: 4, model });
    const spawned = host.workerPids();
    expect(spawned).toHaveLength(4);
    let started = 0;
    await new Promise<void>((resolve) => host.on('worker.started', () => (started += 1) === 4 && resolve()));
    let ready = 0;
    host.on('worker.ready', () => (ready += 1));
    await host.stop();
    expect(ready).toBeLessThan(4);
    expect(host.workerPids()).toEqual([]);
    for (const pid of spawned) expect(() => process.kill(pid, 0)).toThrow();
  });

  it('replaces a worker as soon as it takes its task, keeping the pool warm', async () => {
    const host = createAgentHost({ natsUrl: nats.server.url, roles: ['evaluate'], pool: 1, model });
    await host.ready;
    const [first] = host.workerPids();
    const replaced = new Promise<number>((resolve) => host.once('worker.ready', ({ pid }) => resolve(pid)));
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    const outcome = await dispatcher.dispatch('evaluate', { artifact: 'Each key may send 100 requests per minute.', criteria });
    expect(outcome.worker.pid).toBe(first);
    expect(await replaced).not.toBe(first);
    await host.stop();
  });

  it('fails its ready promise instead of respawning forever when workers cannot start', async () => {
    const host = createAgentHost({ natsUrl: 'nats://127.0.0.1:1', roles: ['evaluate'], pool: 1, model });
    await expect(host.ready).rejects.toThrow('evaluate workers keep failing to start');
    await host.stop();
  });
});

// "A run must not go on unsaved" (DESIGN §6, issue 22): the run manager stores each transition
// in KV before the wave it starts is dispatched. Here the real NATS-backed store refuses one
// write, the snapshot of the transition into Wave 3, and no revise task may leave.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScriptedProvider, handleTask } from '@polish/agents';
import {
  createInProcessDispatcher,
  createRunManager,
  openRunStore,
  type Dispatcher,
  type RunStore,
} from '@polish/orchestrator';
import type { TaskRole } from '@polish/protocol';
import { startNats, type NatsFixture } from './support/nats.js';
import { scenario } from './support/scenario.js';

let nats: NatsFixture;
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await nats?.stop();
});

describe('a KV write that fails before a wave', () => {
  it('stops the run: the wave it would have started is never dispatched', async () => {
    const store = await openRunStore(nats.connection);
    const model = createScriptedProvider(scenario({ verdicts: [[true, false, false]] }));
    const inProcess = createInProcessDispatcher((task) => handleTask(task, model));
    const dispatched: TaskRole[] = [];
    const dispatcher: Dispatcher = {
      dispatch: (role, payload, options) => (dispatched.push(role), inProcess.dispatch(role, payload, options)),
    };
    const runId = randomUUID();
    let refused = 0;
    // The real store, except that it refuses to save the run's record once the run enters Wave 3.
    const refusing: RunStore = {
      ...store,
      async put(key, value) {
        if (key === `run.${runId}` && (value as { state?: string }).state === 'revising') {
          refused += 1;
          throw new Error('KV write refused (injected)');
        }
        await store.put(key, value);
      },
    };
    const manager = createRunManager({ store: refusing, dispatcher, owner: 'unsaved' });
    try {
      await manager.submit({ artifact: '# Doc\nversion 1\n', goal: 'g', cap: 3 }, runId);
      // The run ends with the store's failure, naming the record: it is never reported as finished.
      await expect(manager.result(runId)).rejects.toThrow(
        `run.${runId} could not be saved: KV write refused (injected)`,
      );
      expect(refused).toBeGreaterThan(0);
      // Waves 1 and 2 ran; the revise task whose transition could not be saved never left.
      expect(dispatched).toEqual(['criteria', 'evaluate']);
      // What KV holds is the last state that was saved: the run can be resumed from there.
      expect((await store.get<{ state: string }>(`run.${runId}`))?.state).toBe('evaluating');
      await manager.close();
      const second = createRunManager({ store, dispatcher, owner: 'unsaved' });
      try {
        expect((await second.resumeOwned()).resumed).toEqual([runId]);
        expect((await second.result(runId)).status).toBe('CAP_REACHED');
        expect(dispatched).toEqual(['criteria', 'evaluate', 'revise', 'evaluate', 'revise', 'evaluate']);
      } finally {
        await second.close();
      }
    } finally {
      await manager.close();
    }
  });
});

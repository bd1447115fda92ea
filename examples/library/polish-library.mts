// A program that uses polish as a library (README, Library), run by test/install.test.ts in a
// project where polish was installed from its tarballs:
//   node polish-library.mjs                  in process, with a function as the model
//   node polish-library.mjs nats://…:4222    over NATS, with workers from `polish worker --script script.yaml`
// It prints one line per run and exits 0 only when the run converged.
import { connect } from '@nats-io/transport-node';
import { createScriptedProvider, handleTask, type ModelRequest } from '@polish/agents';
import { createInProcessDispatcher, createNatsDispatcher, runPolish, type Dispatcher } from '@polish/orchestrator';
import type { RunResult } from '@polish/protocol';

const spec = { artifact: 'Hello.\n', goal: 'Greet the world.', cap: 3, threshold: 'pass_all' as const };

/** The scripted model as a function: the same answers as script.yaml. */
function answer(request: ModelRequest): unknown {
  const artifact = String(request.payload.artifact ?? '');
  switch (request.role) {
    case 'criteria':
      return { criteria: [{ id: 'C1', text: 'Names who the greeting is for.' }] };
    case 'evaluate':
      return artifact.includes('world')
        ? { scores: [{ criterion_id: 'C1', pass: true, evidence: 'world' }] }
        : { scores: [{ criterion_id: 'C1', pass: false, gap: 'The greeting names nobody; say who it is for.' }] };
    default:
      return { artifact: 'Hello, world.\n' };
  }
}

async function run(natsUrl: string | undefined): Promise<RunResult> {
  if (!natsUrl) {
    const model = createScriptedProvider(answer);
    return runPolish(spec, { dispatcher: createInProcessDispatcher((task) => handleTask(task, model)) });
  }
  const connection = await connect({ servers: natsUrl });
  const dispatcher: Dispatcher = createNatsDispatcher({ connection, taskTimeoutMs: 60_000 });
  try {
    return await runPolish(spec, { dispatcher });
  } finally {
    await dispatcher.close?.();
    await connection.drain();
  }
}

const natsUrl = process.argv[2];
const result = await run(natsUrl);
const where = natsUrl ? 'over NATS' : 'in process';
const reason = 'reason' in result ? ` (${result.reason})` : '';
console.log(
  `${where}: ${result.status}${reason} after ${result.iterations} iterations: ${JSON.stringify(result.artifact)}`,
);
process.exitCode = result.status === 'CONVERGED' ? 0 : 1;

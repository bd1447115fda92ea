import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { resolveModels } from '../models.js';
import { readSpec } from '../read-spec.js';
import { emitResult, executeRun, readTopology, type TopologyFlags } from './run.js';

const EXAMPLE = fileURLToPath(new URL('../../../../examples/demo/', import.meta.url));

/** `polish demo`: the bundled rate-limit example with the scripted model; converges at iteration 3. */
export async function demoCommand(flags: TopologyFlags & { json?: boolean }): Promise<number> {
  process.stderr.write(
    'polish demo: the model is SCRIPTED. Every answer comes from examples/demo/script.yaml, not an LLM;\n' +
      'the run itself (nats-server, worker processes, waves, locked criteria, verdicts, revisions) is real.\n',
  );
  const spec = readSpec(`${EXAMPLE}artifact.md`, { goal: readFileSync(`${EXAMPLE}goal.txt`, 'utf8').trim() });
  const models = resolveModels({ model: `scripted:${EXAMPLE}script.yaml` }, {});
  const topology = readTopology(flags);
  return emitResult(await executeRun(spec, { ...topology, models: models.byRole }, models.prices), flags);
}

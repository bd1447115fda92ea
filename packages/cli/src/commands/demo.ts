import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { resolveModels } from '../models.js';
import { readSpec } from '../read-spec.js';
import { emitResult, executeRun, readTopology, type TopologyFlags } from './run.js';
import { inspectModeOf, type InspectFlags } from '../inspection.js';
import { loadScriptFile } from '@polish/agents';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A copy of a script whose every answer waits `delayMs`, so a person can follow the run. */
function pacedScript(path: string, delayMs: number): string {
  const script = loadScriptFile(path);
  const paced = Object.fromEntries(
    Object.entries(script).map(([key, rules]) => [
      key,
      Array.isArray(rules) ? rules.map((rule) => ({ ...rule, delay_ms: delayMs })) : rules,
    ]),
  );
  const file = join(mkdtempSync(join(tmpdir(), 'polish-demo-')), 'script.json');
  writeFileSync(file, JSON.stringify({ ...paced, name: 'demo' }));
  return file;
}

// examples/demo of the repository, copied into dist/demo by the build (scripts/copy-demo.js): the
// installed package has it in the same place.
const EXAMPLE = fileURLToPath(new URL('../demo/', import.meta.url));

/** `polish demo`: the bundled rate-limit example with the scripted model; converges at iteration 3. */
export async function demoCommand(flags: TopologyFlags & InspectFlags & { json?: boolean }): Promise<number> {
  process.stderr.write(
    `polish demo: the model is SCRIPTED. Every answer comes from ${EXAMPLE}script.yaml, not an LLM;\n` +
      'the run itself (nats-server, worker processes, waves, locked criteria, verdicts, revisions) is real.\n',
  );
  const spec = readSpec(`${EXAMPLE}artifact.md`, { goal: readFileSync(`${EXAMPLE}goal.txt`, 'utf8').trim() });
  const watched = inspectModeOf(flags) === 'local';
  // Watched in the inspector, the scripted answers come at a human pace, once the page is open.
  const script = watched ? pacedScript(`${EXAMPLE}script.yaml`, 700) : `${EXAMPLE}script.yaml`;
  const models = resolveModels({ model: `scripted:${script}` }, {});
  const topology = readTopology(flags);
  const inspect = watched ? { ...flags, waitForViewerMs: 60_000 } : flags;
  return executeRun(spec, { ...topology, models: models.byRole }, models.prices, inspect, (result) =>
    emitResult(result, flags),
  );
}

import type { ModelInfo, RunEvent } from '@polish/protocol';

/** Writes one line per wave event to a stream (stderr by default), for people watching a run. */
export function createProgressReporter(write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)) {
  const labelled = new Set<string>();
  const labelModel = (model: ModelInfo) => {
    const key = `${model.provider}:${model.model}`;
    if (labelled.has(key)) return;
    labelled.add(key);
    if (model.scripted) write(`  (model ${model.model} is SCRIPTED: its answers come from a script, not an LLM)`);
  };
  return (event: RunEvent): void => {
    switch (event.type) {
      case 'run.started':
        write(`polish: run ${event.runId} started (cap ${event.cap}, threshold ${event.threshold})`);
        break;
      case 'wave.started':
        if (event.role === 'criteria') write('wave 1: extracting criteria…');
        else if (event.role === 'evaluate') write(`iteration ${event.iteration}: wave 2, evaluating…`);
        else write(`iteration ${event.iteration}: wave 3, revising…`);
        break;
      case 'wave.finished':
        labelModel(event.model);
        write(
          `  ${event.role} answered by process ${event.worker.pid}` +
            `${event.attempts > 1 ? ` after ${event.attempts} dispatches` : ''} in ${Math.round(event.duration_ms)} ms`,
        );
        break;
      case 'criteria.locked':
        write(`criteria locked (${event.extracted ? 'extracted by wave 1' : 'given'}):`);
        for (const criterion of event.criteria) write(`  ${criterion.id}: ${criterion.text}`);
        break;
      case 'iteration.evaluated':
        write(`iteration ${event.iteration}: ${event.passed}/${event.total} pass`);
        for (const gap of event.blocking_gaps) write(`  gap ${gap}`);
        break;
      case 'run.finished':
        write(`polish: ${event.status} after ${event.iterations} iteration${event.iterations === 1 ? '' : 's'}`);
        break;
      case 'state.entered':
        break;
    }
  };
}

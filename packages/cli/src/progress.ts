import type { Cost, ModelInfo, RunEvent, Usage } from '@polish/protocol';

const count = (value: number) => value.toLocaleString('en-US');

/** `1,200 in / 80 out tokens (300 cached)` */
export function describeUsage(usage: Usage): string {
  const cached = usage.cache_read_tokens ? `, ${count(usage.cache_read_tokens)} read from cache` : '';
  const written = usage.cache_write_tokens ? `, ${count(usage.cache_write_tokens)} written to cache` : '';
  return `${count(usage.input_tokens)} in / ${count(usage.output_tokens)} out tokens${cached}${written}`;
}

/** `≈ $0.0123`, or why there is no estimate. */
export function describeCost(cost: Cost | undefined): string {
  if (!cost) return '';
  if (cost.total === null) {
    const unpriced = Object.entries(cost.by_model)
      .filter(([, dollars]) => dollars === null)
      .map(([model]) => model);
    return `; no cost estimate: no price for ${unpriced.join(', ')} (add it under prices: in a config file)`;
  }
  return `; estimated cost $${cost.total.toFixed(4)}`;
}

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
        else if (event.role === 'evaluate') {
          // A quorum's judges start together: one line for the wave, one answer line per judge.
          if ((event.judge ?? 1) === 1) write(`iteration ${event.iteration}: wave 2, evaluating…`);
        } else write(`iteration ${event.iteration}: wave 3, revising…`);
        break;
      case 'wave.finished':
        labelModel(event.model);
        write(
          `  ${event.role}${event.judge ? ` (judge ${event.judge}, ${event.model.model})` : ''} answered by process ${event.worker.pid}` +
            `${event.attempts > 1 ? ` after ${event.attempts} dispatches` : ''} in ${Math.round(event.duration_ms)} ms, ${describeUsage(event.usage)}`,
        );
        if (event.dropped_fields)
          write(`  (fields the contract does not know, dropped: ${event.dropped_fields.join(', ')})`);
        break;
      case 'criteria.locked':
        write(`criteria locked (${event.extracted ? 'extracted by wave 1' : 'given'}):`);
        for (const criterion of event.criteria) write(`  ${criterion.id}: ${criterion.text}`);
        break;
      case 'iteration.evaluated':
        write(`iteration ${event.iteration}: ${event.passed}/${event.total} pass`);
        if (event.verdicts && event.agreement) {
          const agreement = event.agreement;
          const cells = Object.entries(event.verdicts).map(
            ([id, verdict]) => `${id} ${verdict} (${Math.round((agreement[id] ?? 0) * 100)}% agree)`,
          );
          write(`  judges: ${cells.join(', ')}`);
        }
        for (const gap of event.blocking_gaps) write(`  gap ${gap}`);
        if (event.regressions) write(`  the revision broke ${event.regressions.join(', ')}`);
        break;
      case 'iteration.revised':
        write(
          event.form === 'edits'
            ? `  revised by ${event.edits?.length ?? 0} edits closing ${event.closes.join(', ')} (${count(event.chars_changed)} characters changed)`
            : `  revised as the whole text (${count(event.chars_changed)} characters changed${event.fell_back ? '; edits kept failing' : ''})`,
        );
        break;
      case 'regression.re_ask':
        write(
          `iteration ${event.iteration}: asking the reviser again from iteration ${event.from}, keeping ${event.criteria.join(', ')}`,
        );
        break;
      case 'budget.exhausted': {
        const spent =
          event.spent_usd === undefined ? `${count(event.spent_tokens)} tokens` : `$${event.spent_usd.toFixed(4)}`;
        const needed =
          event.needed_usd !== undefined
            ? `$${event.needed_usd.toFixed(4)}`
            : `${count(event.needed_tokens ?? 0)} tokens`;
        write(`polish: budget exhausted: ${spent} spent; the next wave needs up to ${needed} at worst`);
        break;
      }
      case 'iteration.finished':
        write(
          `iteration ${event.iteration}: ${describeUsage(event.usage)} in ${count(event.usage.model_calls)} model calls`,
        );
        break;
      case 'run.finished':
        write(`polish: ${event.status} after ${event.iterations} iteration${event.iterations === 1 ? '' : 's'}`);
        write(
          `polish: usage ${describeUsage(event.usage)} in ${count(event.usage.model_calls)} model calls${describeCost(event.cost)}`,
        );
        if (event.quorum?.agreement_rate === null) write(`polish: ${event.quorum.judges} judges: no verdicts given`);
        else if (event.quorum)
          write(
            `polish: ${event.quorum.judges} judges (${event.quorum.rule}) agreed on ${Math.round(event.quorum.agreement_rate * 100)}% of verdicts` +
              `${event.quorum.undecided ? `; ${event.quorum.undecided} undecided` : ''}`,
          );
        break;
      case 'task.waiting':
        write(
          `  ${event.role}: waiting for a worker (${count(event.queued)} queued, ${event.pulling} pulling, ` +
            `${event.in_flight} in flight; ${Math.round(event.waited_ms / 1000)} s so far)`,
        );
        break;
      case 'task.taken':
        if (event.delivery > 1)
          write(`  ${event.role}: taken again by process ${event.worker.pid} (delivery ${event.delivery})`);
        else if (event.queued_ms >= 1_000)
          write(
            `  ${event.role}: taken by process ${event.worker.pid} after ${Math.round(event.queued_ms / 1000)} s in the queue`,
          );
        break;
      case 'task.released':
        write(
          `  ${event.role}: process ${event.worker.pid} gave the task back (${event.reason}); it goes to another worker`,
        );
        break;
      case 'task.queued':
      case 'state.entered':
        break;
    }
  };
}

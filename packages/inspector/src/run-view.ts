import { diffLines } from 'diff';
import type { AnyStateMachine } from 'xstate';
import type { AnyPolicyDecision, ParCycleRecord, RevisionReport, RunEvent, Score, TaskRole } from '@polish/protocol';

/** A statechart as the page draws it: the machine's own states and transitions. */
export interface MachineGraph {
  id: string;
  initial: string;
  states: { key: string; final: boolean }[];
  /** `from: '*'` is a transition the root takes from any state (e.g. CANCEL). */
  edges: { from: string; to: string; event: string }[];
}

/** A readable label for an XState transition event type. */
function eventLabel(type: string): string {
  if (type === '') return 'always';
  if (type.startsWith('xstate.done.actor')) return 'done';
  if (type.startsWith('xstate.error.actor')) return 'error';
  return type;
}

/** The statechart of a machine, from its definition (`machine.root`): states and transitions. */
export function machineGraph(machine: AnyStateMachine): MachineGraph {
  const root = machine.root;
  const edges: MachineGraph['edges'] = [];
  const targets = (transition: { target?: readonly { key: string }[] | undefined }) =>
    (transition.target ?? []).map((node) => node.key);
  for (const [type, transitions] of root.transitions) {
    for (const transition of transitions)
      for (const to of targets(transition)) edges.push({ from: '*', to, event: eventLabel(type) });
  }
  for (const node of Object.values(root.states)) {
    for (const [type, transitions] of node.transitions) {
      for (const transition of transitions)
        for (const to of targets(transition)) edges.push({ from: node.key, to, event: eventLabel(type) });
    }
    for (const transition of node.always ?? [])
      for (const to of targets(transition)) edges.push({ from: node.key, to, event: 'always' });
  }
  const unique = new Map(edges.map((edge) => [`${edge.from}→${edge.to}:${edge.event}`, edge]));
  return {
    id: machine.id,
    initial: String(root.initial?.target[0]?.key ?? ''),
    states: Object.values(root.states).map((node) => ({ key: node.key, final: node.type === 'final' })),
    edges: [...unique.values()],
  };
}

/** One task on the timeline: what a role received and returned. */
export interface TimelineEntry {
  role: TaskRole;
  iteration: number;
  started_at: number;
  finished_at: number | null;
  duration_ms: number | null;
  payload: unknown;
  payload_bytes: number | null;
  result: unknown;
  result_bytes: number | null;
  usage: unknown;
  model: string | null;
  worker: string | null;
  attempts: number | null;
  /** The task queue: `queued` until a worker takes it, `working` until it answers. */
  queue: 'queued' | 'working' | null;
  /** Time it waited in the queue for a worker, and the time its worker spent on it. */
  queued_ms: number | null;
  work_ms: number | null;
  /** Why a worker gave it back (it died, or ran out of time), each time. */
  released: string[];
}

export interface DiffPart {
  kind: 'same' | 'added' | 'removed';
  text: string;
}

/** One judge's score of a criterion, as the grid shows it beside the others. */
export interface JudgeCell {
  judge: number;
  model: string;
  pass: boolean;
  gap: string | null;
  evidence: string | null;
}

/** A criterion in one iteration: pass or fail (or undecided by a quorum), the gap or the quote, and each judge's score. */
export interface GridCell {
  pass: boolean;
  gap: string | null;
  evidence?: string | null;
  verdict?: 'pass' | 'fail' | 'undecided';
  /** Share of judges on the side with more votes (1: all agreed). */
  agreement?: number;
  judges?: JudgeCell[];
}

/** An artifact version: the whole text and its diff against the version before. */
export interface ArtifactVersion {
  label: string;
  text: string;
  diff: DiffPart[];
  /** The version was too large to keep in the events. */
  omitted: boolean;
  /** The revision that made this version: its form, edits and the criterion each claims, its size. */
  revision?: RevisionReport;
}

/** Everything the page shows of one run, computed from its events (all, or the first `upto` for replay). */
export interface RunView {
  runId: string;
  kind: 'polish' | 'par';
  events: number;
  total: number;
  started_at: number | null;
  state: string | null;
  visited: string[];
  taken: { from: string; to: string }[];
  timeline: TimelineEntry[];
  criteria: { id: string; text: string }[];
  /** criteria × iterations: per iteration, per criterion id, the verdict, its gap or quote, and each judge's. */
  grid: { iteration: number; cells: Record<string, GridCell> }[];
  versions: ArtifactVersion[];
  par: {
    topic: string;
    goal: string;
    critique: string;
    cycles: ParCycleRecord[];
    decisions: AnyPolicyDecision[];
  } | null;
  final: { status: string; reason: string | null; detail: Record<string, unknown> } | null;
}

/** The list entry of a run. */
export interface RunSummaryView {
  runId: string;
  kind: 'polish' | 'par';
  title: string;
  status: string;
  iteration: number;
  state: string | null;
  started_at: number | null;
  events: number;
}

/** Line diff, bounded: versions too different to diff cheaply are shown whole instead. */
function diff(before: string, after: string): DiffPart[] {
  const parts = diffLines(before, after, { maxEditLength: 4000 });
  if (!parts)
    return [{ kind: 'same', text: `(too many changes to show line by line: the whole version follows)\n${after}` }];
  return parts.map((part) => ({ kind: part.added ? 'added' : part.removed ? 'removed' : 'same', text: part.value }));
}

const cellOf = (score: Score): GridCell => ({
  pass: score.pass,
  gap: score.gap ?? null,
  evidence: score.evidence ?? null,
});

/** The orchestrator's verdict on each criterion, with each judge's score beside it when there are several. */
function verdictCells(event: Extract<RunEvent, { type: 'iteration.evaluated' }>): Record<string, GridCell> {
  return Object.fromEntries(
    (event.scores ?? []).map((score) => {
      const judges = event.judges?.map((judgement) => {
        const own = judgement.scores.find((entry) => entry.criterion_id === score.criterion_id);
        return {
          judge: judgement.judge,
          model: `${judgement.model.model}${judgement.model.scripted ? ' (scripted)' : ''}`,
          pass: own?.pass ?? false,
          gap: own?.gap ?? null,
          evidence: own?.evidence ?? null,
        };
      });
      const verdict = event.verdicts?.[score.criterion_id];
      const agreement = event.agreement?.[score.criterion_id];
      return [
        score.criterion_id,
        {
          ...cellOf(score),
          ...(verdict ? { verdict } : {}),
          ...(agreement === undefined ? {} : { agreement }),
          ...(judges ? { judges } : {}),
        },
      ];
    }),
  );
}

const kindOf = (events: readonly RunEvent[]): 'polish' | 'par' =>
  events.some((event) => event.type === 'par.started') ? 'par' : 'polish';

/** The short summary of a run for the list. */
export function summarizeRun(runId: string, events: readonly RunEvent[]): RunSummaryView {
  let status = 'running';
  let iteration = 0;
  let state: string | null = null;
  let title = runId;
  for (const event of events) {
    if (event.type === 'state.entered') state = event.state;
    if (event.type === 'iteration.evaluated') iteration = event.iteration;
    if (event.type === 'par.cycle') iteration = event.record.cycle;
    if (event.type === 'run.finished') status = event.status;
    if (event.type === 'par.finished') status = event.final_status.toUpperCase();
    if (event.type === 'par.started') title = `PAR ${event.topic}`;
    if (event.type === 'criteria.locked' && title === runId) title = `polish ${runId.slice(0, 8)}`;
  }
  return {
    runId,
    kind: kindOf(events),
    title,
    status,
    iteration,
    state,
    started_at: events[0]?.at ?? null,
    events: events.length,
  };
}

/** Builds the page's view of a run from its events, in order. Pure: replaying a prefix gives the run as it was then. */
export function buildRunView(runId: string, all: readonly RunEvent[], upto = all.length): RunView {
  const events = all.slice(0, Math.max(0, Math.min(upto, all.length)));
  const view: RunView = {
    runId,
    kind: kindOf(all),
    events: events.length,
    total: all.length,
    started_at: events[0]?.at ?? null,
    state: null,
    visited: [],
    taken: [],
    timeline: [],
    criteria: [],
    grid: [],
    versions: [],
    par: null,
    final: null,
  };
  const open = new Map<string, TimelineEntry>();
  // The revision reported before the version it made is evaluated.
  let revision: RevisionReport | undefined;
  let gates = new Set<string>();
  const reviews = new Map<number, { id: string; passed: boolean; evidence: string }[]>();
  for (const event of events) {
    switch (event.type) {
      case 'state.entered':
        if (view.state && view.state !== event.state) view.taken.push({ from: view.state, to: event.state });
        view.state = event.state;
        if (!view.visited.includes(event.state)) view.visited.push(event.state);
        break;
      case 'criteria.locked':
        view.criteria = event.criteria;
        break;
      case 'wave.started': {
        const entry: TimelineEntry = {
          role: event.role,
          iteration: event.iteration,
          started_at: event.at,
          finished_at: null,
          duration_ms: null,
          payload: event.payload ?? null,
          payload_bytes: event.payload_bytes ?? null,
          result: null,
          result_bytes: null,
          usage: null,
          model: null,
          worker: null,
          attempts: null,
          queue: null,
          queued_ms: null,
          work_ms: null,
          released: [],
        };
        view.timeline.push(entry);
        open.set(`${event.role}:${event.iteration}:${event.judge ?? 1}`, entry);
        // Every judge of a quorum gets the same version: it is one version.
        if (event.role === 'evaluate' && (event.judge ?? 1) === 1) {
          const artifact = (event.payload as { artifact?: unknown } | undefined)?.artifact;
          const previous = view.versions.at(-1);
          if (typeof artifact === 'string') {
            const base = previous && !previous.omitted ? previous.text : undefined;
            view.versions.push({
              label: `iteration ${event.iteration}`,
              text: artifact,
              diff: base === undefined ? [] : diff(base, artifact),
              omitted: false,
              ...(revision ? { revision } : {}),
            });
          } else {
            // Left out of the event (too large, or stored by reference): say so rather than diff against the wrong base.
            view.versions.push({
              label: `iteration ${event.iteration}`,
              text: `(this version, ${event.payload_bytes ?? '?'} bytes, is not kept in the events)`,
              diff: [],
              omitted: true,
              ...(revision ? { revision } : {}),
            });
          }
          revision = undefined;
        }
        break;
      }
      case 'iteration.evaluated': {
        if (!event.scores) break;
        const column = { iteration: event.iteration, cells: verdictCells(event) };
        const index = view.grid.findIndex((entry) => entry.iteration === event.iteration);
        if (index === -1) view.grid.push(column);
        else view.grid[index] = column;
        break;
      }
      case 'iteration.revised': {
        const { type: _type, runId: _runId, at: _at, iteration: _iteration, ...report } = event;
        revision = report;
        break;
      }
      case 'task.queued':
      case 'task.taken':
      case 'task.released': {
        const entry = open.get(`${event.role}:${event.iteration}:${event.judge ?? 1}`);
        if (!entry) break;
        if (event.type === 'task.queued') entry.queue = 'queued';
        if (event.type === 'task.taken') Object.assign(entry, { queue: 'working', queued_ms: event.queued_ms });
        if (event.type === 'task.released') {
          entry.queue = 'queued';
          entry.released.push(`pid ${event.worker.pid}: ${event.reason}`);
        }
        break;
      }
      case 'wave.finished': {
        const key = `${event.role}:${event.iteration}:${event.judge ?? 1}`;
        const entry = open.get(key);
        if (entry) {
          Object.assign(entry, {
            finished_at: event.at,
            duration_ms: event.duration_ms,
            result: event.result ?? null,
            result_bytes: event.result_bytes ?? null,
            usage: event.usage,
            model: `${event.model.model}${event.model.scripted ? ' (scripted)' : ''}`,
            worker: `pid ${event.worker.pid} on ${event.worker.hostname}`,
            attempts: event.attempts,
            queue: null,
            queued_ms: event.queued_ms ?? entry.queued_ms,
            work_ms: event.work_ms ?? null,
          });
          open.delete(key);
        }
        // A judge's answer; the orchestrator's verdict (iteration.evaluated) replaces it below.
        if (event.role === 'evaluate' && (event.judge ?? 1) === 1) {
          const scores = (event.result as { scores?: Score[] } | undefined)?.scores ?? [];
          view.grid.push({
            iteration: event.iteration,
            cells: Object.fromEntries(scores.map((score) => [score.criterion_id, cellOf(score)])),
          });
        }
        if (event.role === 'par.review') {
          const results = (
            event.result as { results?: { id: string; passed: boolean; evidence: string }[] } | undefined
          )?.results;
          if (results) reviews.set(event.iteration, results);
        }
        if (event.role === 'par.act') {
          const before = ((entry?.payload as { artifact?: Record<string, string> } | null)?.artifact ?? {}) as Record<
            string,
            string
          >;
          const changes =
            (event.result as { changes?: { path: string; content: string }[] } | undefined)?.changes ?? [];
          for (const change of changes) {
            view.versions.push({
              label: `cycle ${event.iteration}: ${change.path}`,
              text: change.content,
              diff: diff(before[change.path] ?? '', change.content),
              omitted: false,
            });
          }
        }
        break;
      }
      case 'par.started':
        view.par = {
          topic: event.topic,
          goal: event.goal,
          critique: event.critique_source.kind,
          cycles: [],
          decisions: [],
        };
        view.criteria = event.acceptance_criteria.map((criterion) => ({
          id: criterion.id,
          text: `${criterion.text}${criterion.human_gate ? ' (human gate)' : ''}`,
        }));
        gates = new Set(
          event.acceptance_criteria.filter((criterion) => criterion.human_gate).map((criterion) => criterion.id),
        );
        break;
      case 'par.cycle': {
        view.par?.cycles.push(event.record);
        // A reviewer judged each criterion; a command or a score judges them together; gates wait for a human.
        const review = reviews.get(event.record.cycle);
        const accepted = event.record.verdict === 'pass' || event.record.verdict === 'needs-human';
        view.grid.push({
          iteration: event.record.cycle,
          cells: Object.fromEntries(
            view.criteria.map((criterion) => {
              if (gates.has(criterion.id))
                return [
                  criterion.id,
                  {
                    pass: event.record.verdict === 'pass',
                    gap: event.record.verdict === 'pass' ? null : 'a human decides this gate',
                  },
                ];
              const judged = review?.find((result) => result.id === criterion.id);
              if (judged) return [criterion.id, { pass: judged.passed, gap: judged.passed ? null : judged.evidence }];
              return [criterion.id, { pass: accepted, gap: accepted ? null : event.record.critique }];
            }),
          ),
        });
        break;
      }
      case 'par.decision':
        view.par?.decisions.push(event.decision);
        break;
      case 'run.finished':
        view.final = {
          status: event.status,
          reason: null,
          detail: { iterations: event.iterations, usage: event.usage, ...(event.cost ? { cost: event.cost } : {}) },
        };
        break;
      case 'par.finished':
        view.final = {
          status: event.final_status.toUpperCase(),
          reason: event.reason,
          detail: { cycles: event.cycles },
        };
        break;
      default:
        break;
    }
  }
  return view;
}

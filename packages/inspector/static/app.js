// The polish inspector page. Everything a run contains (artifacts, payloads, gaps) is shown
// as text: it is only ever assigned with textContent or as an attribute value, never parsed as
// HTML, and the server's Content-Security-Policy blocks inline scripts and outside requests.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const page = { runId: null, live: true, view: null, graphs: {}, version: null, followLatest: true, request: 0 };

const $ = (id) => document.getElementById(id);
function el(tag, attributes = {}, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}
function svg(tag, attributes = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}
const getJson = async (path) => {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
};
const bytes = (n) => (n === null || n === undefined ? '' : n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KB`);

async function refreshRuns() {
  const runs = await getJson('/api/runs');
  const list = $('runs');
  list.replaceChildren(
    ...runs.map((run) => {
      const item = el(
        'li',
        { 'data-run-id': run.runId, 'data-status': run.status, class: run.runId === page.runId ? 'selected' : '' },
        run.title,
      );
      item.append(
        el(
          'small',
          {},
          `${run.status} · ${run.kind === 'par' ? 'cycle' : 'iteration'} ${run.iteration}${run.state ? ` · ${run.state}` : ''}`,
        ),
      );
      item.addEventListener('click', () => selectRun(run.runId));
      return item;
    }),
  );
  if (!page.runId && runs.length > 0) await selectRun(runs[0].runId);
}

// Each role's queue and model lane: what waits, for how long, who pulls, what is in hand. Roles with nothing show nothing.
async function refreshQueues() {
  let queues = [];
  try {
    queues = await getJson('/api/queues');
  } catch {
    // No queue yet (no orchestrator has made it): nothing to show.
  }
  const head = el('tr');
  head.append(...['role', 'queued', 'oldest', 'pulling', 'in flight'].map((name) => el('th', {}, name)));
  const rows = queues
    .filter((queue) => queue.queued + queue.pulling + queue.in_flight > 0)
    .map((queue) => {
      // A model lane of a role (a quorum judge's model) is a queue of its own.
      const name = queue.lane ? `${queue.role} lane ${queue.lane}` : queue.role;
      const id = queue.lane ? `${queue.role}-${queue.lane}` : queue.role;
      const row = el('tr', { 'data-role': queue.role, ...(queue.lane ? { 'data-lane': queue.lane } : {}) });
      row.append(
        el('td', {}, name),
        el('td', { 'data-testid': `queued-${id}` }, String(queue.queued)),
        el('td', {}, queue.oldest_ms === null ? '' : `${Math.round(queue.oldest_ms / 1000)} s`),
        el('td', {}, String(queue.pulling)),
        el('td', {}, String(queue.in_flight)),
      );
      return row;
    });
  $('queues').replaceChildren(head, ...rows);
}

async function selectRun(runId) {
  page.runId = runId;
  page.live = true;
  page.version = null;
  page.followLatest = true;
  for (const item of $('runs').children) item.classList.toggle('selected', item.dataset.runId === runId);
  await refreshRun();
}

async function refreshRun(upto) {
  if (!page.runId) return;
  // Replies can come back out of order (a dragged slider): only the latest request renders.
  const request = ++page.request;
  const query = upto === undefined ? '' : `?upto=${upto}`;
  let view;
  try {
    view = await getJson(`/api/runs/${encodeURIComponent(page.runId)}${query}`);
  } catch {
    page.runId = null; // The run is gone (say the inspector restarted): show the newest instead.
    return refreshRuns();
  }
  if (!page.graphs[view.kind]) page.graphs[view.kind] = await getJson(`/api/machines/${view.kind}`);
  if (request !== page.request) return;
  page.view = view;
  render(view);
}

function render(view) {
  $('run').hidden = false;
  $('run-title').textContent = `${view.kind === 'par' ? 'PAR' : 'polish'} run ${view.runId}`;
  $('run-status').textContent = view.final ? view.final.status : 'RUNNING';
  $('run-state').textContent = view.state ?? '';
  const slider = $('replay-slider');
  slider.max = String(Math.max(1, view.total));
  slider.value = String(view.events);
  $('replay-label').textContent = `event ${view.events} of ${view.total}${page.live ? ' (live)' : ' (replay)'}`;
  renderStatechart(view);
  renderGrid(view);
  renderVersions(view);
  renderPar(view);
  renderTimeline(view);
  renderFinal(view);
}

function renderStatechart(view) {
  const graph = page.graphs[view.kind];
  const chart = $('statechart');
  const columns = 5;
  const width = 150;
  const height = 40;
  const gapX = 40;
  const gapY = 50;
  const top = 80; // room for the arcs between states of the first row
  const position = new Map(
    graph.states.map((state, index) => [
      state.key,
      { x: 20 + (index % columns) * (width + gapX), y: top + Math.floor(index / columns) * (height + gapY) },
    ]),
  );
  const rows = Math.ceil(graph.states.length / columns);
  chart.setAttribute('viewBox', `0 0 ${20 + columns * (width + gapX)} ${top + 20 + rows * (height + gapY)}`);
  const defs = svg('defs');
  const marker = svg('marker', {
    id: 'arrow',
    viewBox: '0 0 10 10',
    refX: '10',
    refY: '5',
    markerWidth: '6',
    markerHeight: '6',
    orient: 'auto-start-reverse',
  });
  marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#8a93a6' }));
  defs.append(marker);
  const taken = takenEdges(graph, view.taken);
  const edges = graph.edges
    .filter((edge) => edge.from !== '*' && edge.from !== edge.to)
    .map((edge) => {
      const from = position.get(edge.from);
      const to = position.get(edge.to);
      const x1 = from.x + width / 2;
      const y1 = from.y + height / 2;
      const x2 = to.x + width / 2;
      const y2 = to.y + height / 2;
      // Same row: an arc over the boxes (forward) or under them (back); across rows: a gentle curve.
      const sameRow = y1 === y2;
      const forward = x2 > x1;
      const lift = 22 + Math.abs(x2 - x1) * 0.12;
      const d = sameRow
        ? forward
          ? `M ${x1 + 20} ${y1 - height / 2} Q ${(x1 + x2) / 2} ${y1 - height / 2 - lift} ${x2 - 20} ${y2 - height / 2}`
          : `M ${x1 - 20} ${y1 + height / 2} Q ${(x1 + x2) / 2} ${y1 + height / 2 + lift} ${x2 + 20} ${y2 + height / 2}`
        : `M ${x1} ${y1 + (y2 > y1 ? height / 2 : -height / 2)} Q ${(x1 + x2) / 2 + 18} ${(y1 + y2) / 2 - 18} ${x2} ${y2 + (y2 > y1 ? -height / 2 : height / 2)}`;
      const path = svg('path', {
        class: `edge${taken.has(`${edge.from}→${edge.to}`) ? ' taken' : ''}`,
        d,
        'data-from': edge.from,
        'data-to': edge.to,
      });
      path.append(svg('title', {}, `${edge.from} → ${edge.to} (${edge.event})`));
      return path;
    });
  const states = graph.states.map((state) => {
    const { x, y } = position.get(state.key);
    const classes = [
      'state',
      state.final ? 'final' : '',
      view.visited.includes(state.key) ? 'visited' : '',
      view.state === state.key ? 'active' : '',
    ];
    const group = svg('g', {
      class: classes.filter(Boolean).join(' '),
      'data-state': state.key,
      'data-active': String(view.state === state.key),
    });
    group.append(svg('rect', { x, y, width, height }), svg('text', { x: x + width / 2, y: y + height / 2 }, state.key));
    return group;
  });
  chart.replaceChildren(defs, ...edges, ...states);
  const any = graph.edges.filter((edge) => edge.from === '*').map((edge) => `${edge.event} → ${edge.to}`);
  $('any-state').textContent = any.length > 0 ? `From any state: ${any.join(', ')}` : '';
}

/**
 * The edges a run took. States left by an `always` transition at once (say `judging`) are never
 * observed, so a step between two observed states may pass through them: take the shortest
 * such path in the chart.
 */
function takenEdges(graph, steps) {
  const out = new Map();
  for (const edge of graph.edges) if (edge.from !== '*') out.set(edge.from, [...(out.get(edge.from) ?? []), edge.to]);
  const transient = new Set(
    graph.states
      .map((state) => state.key)
      .filter((key) => graph.edges.filter((edge) => edge.from === key).every((edge) => edge.event === 'always')),
  );
  const taken = new Set();
  for (const step of steps) {
    const queue = [[step.from]];
    const seen = new Set([step.from]);
    while (queue.length > 0) {
      const path = queue.shift();
      const last = path[path.length - 1];
      if (last === step.to && path.length > 1) {
        for (let index = 1; index < path.length; index += 1) taken.add(`${path[index - 1]}→${path[index]}`);
        break;
      }
      for (const next of out.get(last) ?? []) {
        if (seen.has(next) || (next !== step.to && !transient.has(next))) continue;
        seen.add(next);
        queue.push([...path, next]);
      }
    }
  }
  return taken;
}

function renderGrid(view) {
  const table = $('grid');
  const head = el('tr');
  head.append(
    el('th', {}, 'criterion'),
    ...view.grid.map((column) => el('th', {}, `${view.kind === 'par' ? 'cycle' : 'iteration'} ${column.iteration}`)),
  );
  const rows = view.criteria.map((criterion) => {
    const row = el('tr', { 'data-criterion': criterion.id });
    row.append(el('td', { title: criterion.text }, `${criterion.id}: ${criterion.text}`));
    for (const column of view.grid) {
      const cell = column.cells[criterion.id];
      row.append(cell ? gridCell(cell, column.iteration) : el('td', {}, ''));
    }
    return row;
  });
  table.replaceChildren(head, ...rows);
}

/** A criterion in one iteration: its verdict with the gap or the quote, and each judge's score side by side. */
function gridCell(cell, iteration) {
  const verdict = cell.verdict ?? (cell.pass ? 'pass' : 'fail');
  const detail = cell.pass ? (cell.evidence ? `quote: “${cell.evidence}”` : 'passes') : (cell.gap ?? '');
  const td = el('td', { class: verdict, title: detail, 'data-iteration': iteration, 'data-verdict': verdict }, verdict);
  if (cell.agreement !== undefined) td.append(el('small', {}, ` ${Math.round(cell.agreement * 100)}%`));
  if (cell.judges) {
    const judges = el('div', { class: 'judges', 'data-testid': 'judges' });
    judges.replaceChildren(
      ...cell.judges.map((judge) =>
        el(
          'span',
          {
            class: judge.pass ? 'pass' : 'fail',
            'data-judge': judge.judge,
            title: `judge ${judge.judge} (${judge.model}): ${judge.pass ? `quote: “${judge.evidence ?? ''}”` : (judge.gap ?? '')}`,
          },
          `J${judge.judge} ${judge.pass ? '✓' : '✗'}`,
        ),
      ),
    );
    td.append(judges);
  }
  return td;
}

function renderVersions(view) {
  const tabs = $('version-tabs');
  const versions = view.versions;
  if (page.version === null || page.version >= versions.length || page.followLatest) page.version = versions.length - 1;
  tabs.replaceChildren(
    ...versions.map((version, index) => {
      const button = el(
        'button',
        { type: 'button', class: index === page.version ? 'selected' : '', 'data-version': index },
        version.label,
      );
      button.addEventListener('click', () => {
        page.version = index;
        page.followLatest = index === versions.length - 1;
        renderVersions(page.view);
      });
      return button;
    }),
  );
  const chosen = versions[page.version];
  renderRevision(chosen?.revision);
  const diff = $('diff');
  if (!chosen) return diff.replaceChildren(document.createTextNode('no version yet'));
  if (chosen.diff.length === 0) return diff.replaceChildren(document.createTextNode(chosen.text));
  diff.replaceChildren(...chosen.diff.map((part) => el('span', { class: part.kind }, part.text)));
}

const clip = (text, length = 160) => (text.length > length ? `${text.slice(0, length)}…` : text);

/** What the revision that made a version changed: its edits with the criterion each claims, or its size as a whole text. */
function renderRevision(revision) {
  const box = $('revision');
  if (!revision) return box.replaceChildren();
  const size = `${revision.chars_changed.toLocaleString('en-US')} characters changed`;
  if (revision.form === 'full') {
    const why = revision.fell_back ? ' (edits kept failing: the reviser fell back to the whole text)' : '';
    return box.replaceChildren(el('p', { class: 'note' }, `Revised as the whole text: ${size}${why}.`));
  }
  const edits = revision.edits ?? [];
  const list = el('ol', { 'data-testid': 'edits' });
  list.replaceChildren(
    ...edits.map((edit) => {
      const item = el('li', { 'data-criterion': edit.criterion_id });
      item.append(
        el('strong', {}, `${edit.criterion_id} `),
        el('span', { class: 'removed' }, clip(edit.find)),
        document.createTextNode(' → '),
        el('span', { class: 'added' }, clip(edit.replace)),
      );
      return item;
    }),
  );
  box.replaceChildren(
    el(
      'p',
      { class: 'note' },
      `Revised by ${edits.length} edit${edits.length === 1 ? '' : 's'} closing ${revision.closes.join(', ')}: ${size}.`,
    ),
    list,
  );
}

function renderPar(view) {
  $('par-section').hidden = !view.par;
  if (!view.par) return;
  const head = el('tr');
  head.append(...['cycle', 'plan', 'verdict', 'critique', 'evidence', 'next'].map((name) => el('th', {}, name)));
  const rows = view.par.cycles.map((cycle) => {
    const row = el('tr', { 'data-cycle': cycle.cycle });
    row.append(
      el('td', {}, cycle.cycle),
      el('td', {}, cycle.plan_summary),
      el(
        'td',
        { class: cycle.verdict === 'pass' ? 'pass' : cycle.verdict === 'needs-human' ? '' : 'fail' },
        cycle.verdict,
      ),
      el('td', {}, cycle.critique),
      el('td', {}, cycle.evidence_refs.join('\n')),
      el('td', {}, cycle.next_action),
    );
    return row;
  });
  $('cycles').replaceChildren(head, ...rows);
  $('decisions').replaceChildren(
    ...view.par.decisions.map((decision) =>
      el('li', {}, `${decision.decision}${decision.reasons.length > 0 ? `: ${decision.reasons.join('; ')}` : ''}`),
    ),
  );
}

function renderTimeline(view) {
  const head = el('tr');
  head.append(
    ...[
      'role',
      view.kind === 'par' ? 'cycle' : 'iteration',
      'sent',
      'returned',
      'queued',
      'work',
      'duration',
      'model',
      'worker',
    ].map((name) => el('th', {}, name)),
  );
  const rows = view.timeline.map((entry, index) => {
    const row = el('tr', { 'data-role': entry.role, 'data-index': index });
    row.append(
      el('td', {}, entry.role),
      el('td', {}, entry.iteration),
      el('td', {}, bytes(entry.payload_bytes)),
      el(
        'td',
        {},
        entry.finished_at !== null
          ? bytes(entry.result_bytes)
          : entry.queue === 'queued'
            ? 'in the queue…'
            : entry.queue === 'working'
              ? 'working…'
              : 'waiting…',
      ),
      el('td', {}, entry.queued_ms === null ? '' : `${Math.round(entry.queued_ms)} ms`),
      el('td', {}, entry.work_ms === null ? '' : `${Math.round(entry.work_ms)} ms`),
      el('td', {}, entry.duration_ms === null ? '' : `${Math.round(entry.duration_ms)} ms`),
      el('td', {}, entry.model ?? ''),
      el('td', {}, entry.worker ?? ''),
    );
    if (entry.released.length > 0) row.title = `given back: ${entry.released.join('; ')}`;
    row.addEventListener('click', () => void showMessage(entry, index));
    return row;
  });
  $('timeline').replaceChildren(head, ...rows);
}

async function showMessage(entry, index) {
  const box = $('message');
  const upto = page.live ? '' : `?upto=${page.view.events}`;
  const message = await getJson(`/api/runs/${encodeURIComponent(page.runId)}/messages/${index}${upto}`);
  entry = { ...entry, ...message };
  box.replaceChildren(
    el('h4', {}, `${entry.role}, ${entry.iteration}: received`),
    el(
      'pre',
      { 'data-testid': 'message-payload' },
      entry.payload === null ? '(not kept: too large)' : JSON.stringify(entry.payload, null, 2),
    ),
    el('h4', {}, 'returned'),
    el(
      'pre',
      { 'data-testid': 'message-result' },
      entry.result === null ? '(no answer yet)' : JSON.stringify(entry.result, null, 2),
    ),
    el('h4', {}, 'usage'),
    el('pre', {}, JSON.stringify(entry.usage, null, 2)),
  );
}

function renderFinal(view) {
  const box = $('final');
  if (!view.final) return box.replaceChildren(document.createTextNode('still running'));
  box.replaceChildren(
    el('p', {}, `${view.final.status}${view.final.reason ? `: ${view.final.reason}` : ''}`),
    el('pre', {}, JSON.stringify(view.final.detail, null, 2)),
  );
}

function replayTo(upto) {
  page.live = false;
  void refreshRun(Math.max(1, Math.min(upto, page.view?.total ?? upto)));
}

$('replay-slider').addEventListener('input', (event) => replayTo(Number(event.target.value)));
$('replay-prev').addEventListener('click', () => replayTo((page.view?.events ?? 1) - 1));
$('replay-next').addEventListener('click', () => replayTo((page.view?.events ?? 0) + 1));
$('replay-live').addEventListener('click', () => {
  page.live = true;
  void refreshRun();
});

// Live updates: the server says which run has new events; the page refetches what it shows.
// At most one refresh at a time; events that arrive during one trigger another after it.
let pending = false;
let dirty = false;
function scheduleRefresh() {
  if (pending) {
    dirty = true;
    return;
  }
  pending = true;
  dirty = false;
  setTimeout(async () => {
    try {
      await refreshRuns();
      await refreshQueues();
      if (page.live) await refreshRun();
    } finally {
      pending = false;
      if (dirty) scheduleRefresh();
    }
  }, 50);
}
const stream = new EventSource('/api/stream');
stream.addEventListener('open', () => ($('connection').textContent = 'live'));
stream.addEventListener('error', () => ($('connection').textContent = 'reconnecting…'));
stream.addEventListener('message', scheduleRefresh);
void refreshRuns();
void refreshQueues();
setInterval(() => void refreshQueues(), 2000);

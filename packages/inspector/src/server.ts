import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { DEFAULT_SUBJECT_PREFIX, RunEventSchema, wireNames, type RunEvent, natsServers } from '@polish/protocol';
import { parMachine, polishMachine, readQueueStats } from '@polish/orchestrator';
import { buildRunView, machineGraph, summarizeRun, type RunView } from './run-view.js';

/** How to start the inspector. */
export interface InspectorOptions {
  /** The NATS where runs publish `polish.v1.events.<runId>`. */
  natsUrl: string;
  /** 0 picks a free port. Default 4800. */
  port?: number;
  /** Default 127.0.0.1: the page is for this machine only. */
  host?: string;
  prefix?: string;
  /**
   * How it connects: its own NATS identity when the server enforces per-role permissions (it may
   * only read the event stream), and TLS.
   */
  auth?: Partial<ConnectionOptions>;
  log?: (line: string) => void;
}

/** A running inspector. */
export interface Inspector {
  url: string;
  /** Every event seen, per run (read from the event stream, then live). */
  runs(): Map<string, RunEvent[]>;
  /** Resolves once a page is open on the inspector (live updates connected), or after `timeoutMs`. */
  viewerConnected(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

const STATIC = new URL('../static/', import.meta.url);
const FILES: Record<string, string> = { '/': 'index.html', '/app.js': 'app.js', '/app.css': 'app.css' };
const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};
// Nothing on the page may load from or talk to anything but this server, and no inline script runs.
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};
const GRAPHS = { polish: machineGraph(polishMachine), par: machineGraph(parMachine) };

/**
 * Starts the inspector: follows every run's events on NATS (the JetStream event stream from its
 * start, then live; the stream is created if missing so runs become replayable) and serves the
 * page and its JSON API on 127.0.0.1, with live updates as server-sent events.
 */
export async function startInspector(options: InspectorOptions): Promise<Inspector> {
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const log = options.log ?? (() => undefined);
  const connection: NatsConnection = await connect({
    servers: natsServers(options.natsUrl),
    name: `polish-inspector-${process.pid}`,
    ...options.auth,
  });
  const runs = new Map<string, RunEvent[]>();
  const listeners = new Set<ServerResponse>();
  const viewerWaiters = new Set<() => void>();
  const names = wireNames(prefix);
  const subjects = names.allEvents;
  const loopbackOnly = !options.host || ['127.0.0.1', 'localhost', '::1'].includes(options.host);
  const allowedHosts = new Set([
    '127.0.0.1',
    'localhost',
    '[::1]',
    ...(options.host && options.host !== '0.0.0.0' && options.host !== '::' ? [options.host] : []),
  ]);
  if (options.host && !['127.0.0.1', 'localhost', '::1'].includes(options.host)) {
    log(
      `polish: warning: the inspector binds ${options.host}: anyone who reaches it sees every run's artifacts and messages (there is no login)`,
    );
  }
  const streamName = names.events;

  const accept = (data: Uint8Array) => {
    let parsed;
    try {
      parsed = RunEventSchema.safeParse(JSON.parse(new TextDecoder().decode(data)));
    } catch {
      return;
    }
    if (!parsed.success) return;
    const event = parsed.data;
    const events = runs.get(event.runId) ?? [];
    events.push(event);
    runs.set(event.runId, events);
    const line = `data: ${JSON.stringify({ runId: event.runId, events: events.length })}\n\n`;
    for (const listener of listeners) listener.write(line);
  };

  let messages:
    Awaited<ReturnType<Awaited<ReturnType<ReturnType<typeof jetstream>['consumers']['get']>>['consume']>> | undefined;
  let following: Promise<void> = Promise.resolve();
  const server = createServer((request, response) => {
    try {
      handle(request, response);
    } catch {
      // A malformed request (say a bad %-escape) is the sender's problem, never a crash.
      if (!response.headersSent) send(response, 400, '{"error":"bad request"}');
    }
  });
  const host = options.host ?? '127.0.0.1';
  let closed = false;
  // The event stream is made by the orchestrators (polish serve, polish run): the inspector only
  // reads it. Until it exists the page is served (with no runs) and the inspector looks again.
  const follow = async () => {
    const manager = await jetstreamManager(connection);
    for (let told = false; !closed && !(await manager.streams.info(streamName).catch(() => undefined)); told = true) {
      if (!told) log(`polish: inspector: waiting for the event stream ${streamName} (start polish serve, or a run)`);
      await new Promise((resolve) => setTimeout(resolve, 500).unref());
    }
    if (closed) return;
    // An ordered consumer: every stored event in order, then the live ones, no durable state left behind.
    const consumer = await jetstream(connection).consumers.get(streamName, { filter_subjects: subjects });
    const consuming = await consumer.consume();
    messages = consuming;
    if (closed) return consuming.stop();
    for await (const message of consuming) accept(message.data);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 4800, host, () => resolve());
    });
  } catch (error) {
    await connection.close().catch(() => undefined);
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(
      code === 'EADDRINUSE'
        ? `port ${options.port ?? 4800} is in use (another inspector?): choose another, or 0 for a free one`
        : (error as Error).message,
    );
  }
  following = follow().catch((error: Error) => log(`polish: inspector: stopped following events: ${error.message}`));

  // The whole view of a run is built once per new event, not once per request.
  const views = new Map<string, { count: number; view: RunView }>();
  const viewOf = (runId: string, events: RunEvent[], upto: number): RunView => {
    if (upto < events.length) return buildRunView(runId, events, upto);
    const cached = views.get(runId);
    if (cached?.count === events.length) return cached.view;
    const view = buildRunView(runId, events);
    views.set(runId, { count: events.length, view });
    return view;
  };

  const send = (response: ServerResponse, status: number, body: string, type = 'application/json; charset=utf-8') => {
    response.writeHead(status, { 'content-type': type, ...SECURITY_HEADERS });
    response.end(body);
  };

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://inspector');
    // Only requests addressed to this server by name: another site cannot rebind its name to it.
    const hostHeader = (request.headers.host ?? '').replace(/:\d+$/, '');
    // IP literals cannot be rebound; names other than the loopback ones (and the bound one) are refused.
    const ipLiteral = /^(\d{1,3}\.){3}\d{1,3}$|^\[[0-9a-f:.]+\]$/i.test(hostHeader);
    if (!allowedHosts.has(hostHeader) && !(ipLiteral && !loopbackOnly))
      return send(response, 403, '{"error":"forbidden host"}');
    if (request.method !== 'GET') return send(response, 405, '{"error":"method not allowed"}');
    const file = FILES[url.pathname];
    if (file)
      return send(response, 200, readFileSync(new URL(file, STATIC), 'utf8'), TYPES[file.split('.').at(-1) ?? 'html']);
    if (url.pathname === '/api/runs') {
      const list = [...runs]
        .map(([runId, events]) => summarizeRun(runId, events))
        .sort((a, b) => (b.started_at ?? 0) - (a.started_at ?? 0));
      return send(response, 200, JSON.stringify(list));
    }
    const run = /^\/api\/runs\/([^/]+)(?:\/messages\/(\d+))?$/.exec(url.pathname);
    if (run) {
      const runId = decodeURIComponent(run[1] ?? '');
      const events = runs.get(runId);
      if (!events) return send(response, 404, JSON.stringify({ error: `no run ${runId}` }));
      const upto = url.searchParams.has('upto') ? Number(url.searchParams.get('upto')) : events.length;
      const view = viewOf(runId, events, Number.isFinite(upto) ? upto : events.length);
      if (run[2] !== undefined) {
        // One message in full, fetched when clicked: the view itself carries no payloads.
        const entry = view.timeline[Number(run[2])];
        if (!entry) return send(response, 404, '{"error":"no such message"}');
        return send(
          response,
          200,
          JSON.stringify({ payload: entry.payload, result: entry.result, usage: entry.usage }),
        );
      }
      return send(
        response,
        200,
        JSON.stringify({
          ...view,
          timeline: view.timeline.map(({ payload: _payload, result: _result, ...rest }) => rest),
        }),
      );
    }
    if (url.pathname === '/api/queues') {
      // Each role's task queue, read now: waiting tasks, the oldest's age, workers pulling, in hand.
      void jetstreamManager(connection)
        .then((manager) => readQueueStats(manager, prefix))
        .then(
          (queues) => send(response, 200, JSON.stringify(queues)),
          (error: Error) => send(response, 503, JSON.stringify({ error: `task queues unavailable: ${error.message}` })),
        );
      return undefined;
    }
    const machine = /^\/api\/machines\/(polish|par)$/.exec(url.pathname);
    if (machine) return send(response, 200, JSON.stringify(GRAPHS[machine[1] as 'polish' | 'par']));
    if (url.pathname === '/api/stream') {
      response.writeHead(200, { 'content-type': 'text/event-stream', connection: 'keep-alive', ...SECURITY_HEADERS });
      response.write(': connected\n\n');
      listeners.add(response);
      for (const wake of viewerWaiters) wake();
      request.on('close', () => listeners.delete(response));
      return undefined;
    }
    return send(response, 404, '{"error":"not found"}');
  };

  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}/`;
  log(`polish: inspector on ${url} (following ${subjects} on ${options.natsUrl})`);
  return {
    url,
    runs: () => runs,
    viewerConnected: (timeoutMs) =>
      new Promise<boolean>((resolve) => {
        if (listeners.size > 0) return resolve(true);
        const timer = setTimeout(() => finish(false), timeoutMs);
        const finish = (connected: boolean) => {
          clearTimeout(timer);
          viewerWaiters.delete(wake);
          resolve(connected);
        };
        const wake = () => finish(true);
        viewerWaiters.add(wake);
      }),
    async close() {
      closed = true;
      for (const listener of listeners) listener.end();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      messages?.stop();
      await following.catch(() => undefined);
      await connection.drain().catch(() => undefined);
    },
  };
}

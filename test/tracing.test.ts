import { createServer, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats, type NatsFixture } from './support/nats.js';
import { startHost, startPolish, stop } from './support/processes.js';

const demo = 'examples/demo';
const goal = readFileSync(`${demo}/goal.txt`, 'utf8').trim();

/** One span as an OTLP/HTTP JSON export carries it, with its resource's attributes alongside. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  startTimeUnixNano: string;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
}

const attributesOf = (list: OtlpAttribute[] | undefined): Record<string, unknown> =>
  Object.fromEntries(
    (list ?? []).map(({ key, value }) => [
      key,
      value.stringValue ??
        (value.intValue === undefined ? undefined : Number(value.intValue)) ??
        value.boolValue ??
        value.doubleValue,
    ]),
  );

/**
 * A local OTLP/HTTP trace receiver (what a collector offers on :4318): POST /v1/traces with the
 * JSON encoding the OTLP/HTTP exporter sends. `until` resolves once the spans received satisfy a
 * condition: checked on every export, never on a timer.
 */
async function startReceiver() {
  const spans: ReceivedSpan[] = [];
  const contentTypes = new Set<string | undefined>();
  let requests = 0;
  const waiters: { done: (spans: ReceivedSpan[]) => boolean; resolve: () => void }[] = [];
  const settle = () => {
    for (const waiter of [...waiters]) {
      if (!waiter.done(spans)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  };
  const server: Server = createServer((request, response) => {
    requests += 1;
    if (request.method !== 'POST' || request.url !== '/v1/traces') {
      response.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      contentTypes.add(request.headers['content-type']);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: {
          resource: { attributes: OtlpAttribute[] };
          scopeSpans: { spans: (Omit<ReceivedSpan, 'attributes' | 'resource'> & { attributes: OtlpAttribute[] })[] }[];
        }[];
      };
      for (const resourceSpans of body.resourceSpans) {
        const resource = attributesOf(resourceSpans.resource.attributes);
        for (const scope of resourceSpans.scopeSpans) {
          for (const span of scope.spans) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId || undefined,
              name: span.name,
              startTimeUnixNano: String(span.startTimeUnixNano),
              attributes: attributesOf(span.attributes),
              resource,
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      settle();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    requests: () => requests,
    until(done: (spans: ReceivedSpan[]) => boolean): Promise<void> {
      return new Promise((resolve) => {
        waiters.push({ done, resolve });
        settle();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Every OTEL variable the exporter would read, cleared: the run sees only what a test gives it. */
const NO_OTEL = {
  OTEL_EXPORTER_OTLP_ENDPOINT: '',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
  OTEL_SDK_DISABLED: '',
  OTEL_TRACES_EXPORTER: '',
  OTEL_SERVICE_NAME: '',
};

describe('OpenTelemetry traces', () => {
  let nats: NatsFixture;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    nats = await startNats({ trace: true });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await nats?.stop();
  });

  /** Runs the demo with a `polish worker --pool 2` host on the shared NATS, both with this environment. */
  async function runDemo(env: NodeJS.ProcessEnv) {
    const host = await startHost(nats.server.url, ['--pool', '2', '--script', `${demo}/script.yaml`], env);
    try {
      const run = startPolish(
        ['run', `${demo}/artifact.md`, '--goal', goal, '--nats', nats.server.url, '--local', '--json'],
        env,
      );
      const { code } = await run.exited;
      expect(code, run.lines.join('\n')).toBe(0);
      expect(JSON.parse(run.stdout()).status).toBe('CONVERGED');
      return { host, orchestratorPid: run.child.pid! };
    } catch (error) {
      await stop(host);
      throw error;
    }
  }

  it('makes one tree of the spans of the orchestrator and of the worker processes', async () => {
    const traceStart = nats.trace().length;
    const env = { ...NO_OTEL, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url };
    const { host, orchestratorPid } = await runDemo(env);
    try {
      // The orchestrator flushed before it exited. Each worker flushes before its single-use
      // process exits, on its own (the host still runs): wait until every task's spans are in.
      const named = (spans: ReceivedSpan[], prefix: string) => spans.filter((span) => span.name.startsWith(prefix));
      await receiver.until((spans) => {
        const tasks = named(spans, 'polish.task ');
        return (
          named(spans, 'polish.run').length === 1 &&
          named(spans, 'polish.wave ').length === 6 &&
          tasks.length === 6 &&
          tasks.every((task) =>
            spans.some((span) => span.name === 'polish.model.call' && span.parentSpanId === task.spanId),
          )
        );
      });

      const spans = [...receiver.spans];
      expect([...receiver.contentTypes]).toEqual(['application/json']);
      expect(new Set(spans.map((span) => span.traceId)).size).toBe(1);
      const byId = new Map(spans.map((span) => [span.spanId, span]));
      const parentOf = (span: ReceivedSpan) => byId.get(span.parentSpanId ?? '');

      // The root: the run, in the orchestrator process.
      const [root, ...otherRoots] = spans.filter((span) => span.parentSpanId === undefined);
      expect(otherRoots).toEqual([]);
      expect(root!.name).toBe('polish.run');
      expect(root!.resource['process.pid']).toBe(orchestratorPid);
      expect(root!.resource['service.name']).toBe('polish');
      expect(root!.attributes).toMatchObject({ 'polish.status': 'CONVERGED', 'polish.iterations': 3 });
      expect(root!.attributes['polish.run_id']).toMatch(/^[0-9a-f-]{36}$/);

      // One span per wave, children of the run, in the orchestrator process.
      const waves = spans
        .filter((span) => span.name.startsWith('polish.wave '))
        .sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));
      expect(waves.map((wave) => wave.name)).toEqual(
        ['criteria', 'evaluate', 'revise', 'evaluate', 'revise', 'evaluate'].map((role) => `polish.wave ${role}`),
      );
      for (const wave of waves) {
        expect(parentOf(wave)).toBe(root);
        expect(wave.resource['process.pid']).toBe(orchestratorPid);
        expect(wave.attributes['polish.attempts']).toBe(1);
      }
      expect(
        waves.filter((wave) => wave.name === 'polish.wave evaluate').map((wave) => wave.attributes['polish.iteration']),
      ).toEqual([1, 2, 3]);

      // One task span per wave, a child of it, each in a worker process of the host.
      const tasks = spans.filter((span) => span.name.startsWith('polish.task '));
      const workerPids = tasks.map((task) => task.resource['process.pid'] as number);
      for (const task of tasks) {
        const wave = parentOf(task);
        expect(wave?.name).toBe(task.name.replace('polish.task', 'polish.wave'));
        expect(parentOf(wave!)).toBe(root);
        expect(task.resource['service.name']).toBe('polish-worker');
        expect(task.attributes['process.pid']).toBe(task.resource['process.pid']);
        expect(task.attributes['polish.ok']).toBe(true);
      }
      expect(new Set(tasks.map((task) => parentOf(task)))).toEqual(new Set(waves));
      expect(new Set(workerPids).size).toBeGreaterThanOrEqual(2);
      expect(workerPids).not.toContain(orchestratorPid);
      for (const pid of workerPids) await host.workerReady(pid);

      // Every model call is a child of its task, in the same worker process.
      const calls = spans.filter((span) => span.name === 'polish.model.call');
      expect(calls.length).toBeGreaterThanOrEqual(tasks.length);
      for (const call of calls) {
        const task = parentOf(call);
        expect(task?.name).toMatch(/^polish\.task /);
        expect(call.resource['process.pid']).toBe(task!.resource['process.pid']);
        expect(call.attributes).toMatchObject({ 'gen_ai.provider.name': 'scripted', 'polish.model.scripted': true });
      }
      expect(spans).toHaveLength(1 + waves.length + tasks.length + calls.length);

      // The context crossed NATS as a W3C traceparent header of the task messages.
      expect(nats.trace().slice(traceStart)).toContain(`traceparent: 00-${root!.traceId}-`);
    } finally {
      await stop(host);
    }
  });

  it('sends nothing and adds no header when no endpoint is configured', async () => {
    const traceStart = nats.trace().length;
    const before = receiver.requests();
    const { host } = await runDemo(NO_OTEL);
    // Every worker that served a task has exited; stopping the host ends the others.
    await stop(host);
    expect(receiver.requests()).toBe(before);
    const wire = nats.trace().slice(traceStart);
    expect(wire).toContain('polish.v1.task.evaluate');
    expect(wire).not.toContain('traceparent');
  });

  it('sends nothing when OTEL_SDK_DISABLED=true, even with an endpoint', async () => {
    const before = receiver.requests();
    const { host } = await runDemo({
      ...NO_OTEL,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SDK_DISABLED: 'true',
    });
    await stop(host);
    expect(receiver.requests()).toBe(before);
  });
});

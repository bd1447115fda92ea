import type { NatsConnection } from '@nats-io/transport-node';
import { Svcm, type Service } from '@nats-io/services';
import {
  DEFAULT_SUBJECT_PREFIX,
  RUN_SERVICE_NAME,
  firstIssue,
  isInvalidInput,
  serviceDiscoverySubject,
  ExtendRequestSchema,
  PolishError,
  RUN_OPERATIONS,
  RunIdRequestSchema,
  RunServiceReplySchema,
  SubmitRequestSchema,
  runServiceSubject,
  type QueueStats,
  type RunOperation,
  type RunServiceReply,
  type RunSummary,
} from '@polish/protocol';
import { z } from 'zod';
import { NOT_FOUND_FIELD, type RunManager } from './run-manager.js';
import { resolveArtifacts, type RunStore } from './run-store.js';

async function perform(
  manager: RunManager,
  operation: RunOperation,
  body: unknown,
  queues: (() => Promise<QueueStats[]>) | undefined,
): Promise<RunServiceReply> {
  switch (operation) {
    case 'submit': {
      const request = SubmitRequestSchema.parse(body);
      return { ok: true, run: await manager.submit(request.spec as never, request.runId) };
    }
    case 'status': {
      const run = await manager.status(RunIdRequestSchema.parse(body).runId);
      return run
        ? { ok: true, run }
        : { ok: false, code: 'NOT_FOUND', message: `no run ${(body as { runId: string }).runId}` };
    }
    case 'list':
      return { ok: true, runs: await manager.list() };
    case 'cancel':
      return { ok: true, run: await manager.cancel(RunIdRequestSchema.parse(body).runId) };
    case 'extend': {
      const request = ExtendRequestSchema.parse(body);
      return { ok: true, run: await manager.extend(request.runId, request.cap) };
    }
    case 'resume':
      return { ok: true, run: await manager.resume(RunIdRequestSchema.parse(body).runId) };
    case 'queues':
      return { ok: true, queues: (await queues?.()) ?? [] };
  }
}

function failure(error: unknown): RunServiceReply {
  if (isInvalidInput(error)) {
    return { ok: false, code: error.field === NOT_FOUND_FIELD ? 'NOT_FOUND' : 'INVALID_INPUT', message: error.message };
  }
  if (error instanceof z.ZodError) {
    const issue = firstIssue(error, 'request');
    return { ok: false, code: 'INVALID_INPUT', message: `${issue.path}: ${issue.message}` };
  }
  return { ok: false, code: 'INTERNAL', message: (error as Error)?.message ?? String(error) };
}

/**
 * Serves the run manager as a NATS service: `polish.v1.run.{submit,status,list,cancel,extend,resume,queues}`,
 * discoverable with `$SRV.PING/INFO/STATS`. Requests and replies are JSON (`run-service.*` schemas).
 */
export async function startRunService(
  connection: NatsConnection,
  manager: RunManager,
  store: RunStore,
  options: { prefix?: string; version?: string; queues?: () => Promise<QueueStats[]> } = {},
): Promise<Service> {
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  // @nats-io/services is built against an older nats-core; the connection object is the same.
  const service = await new Svcm(connection as never).add({
    name: RUN_SERVICE_NAME,
    version: options.version ?? '0.1.0',
    description: 'polish runs: submit, status, list, cancel, extend, resume; task queues',
  });
  for (const operation of RUN_OPERATIONS) {
    service.addEndpoint(operation, {
      subject: runServiceSubject(operation, prefix),
      handler: (_error, message) => {
        let body: unknown = {};
        try {
          body = message.data.length ? message.json() : {};
        } catch {
          message.respond(JSON.stringify(failure(new PolishError('INVALID_INPUT', 'the request is not JSON'))));
          return;
        }
        // Large artifacts in replies travel as Object Store references, like in KV records.
        perform(manager, operation, body, options.queues).then(
          async (reply) => message.respond(JSON.stringify(await store.externalize(reply))),
          (error: unknown) => message.respond(JSON.stringify(failure(error))),
        );
      },
    });
  }
  // Ready means the server has the subscriptions: a request sent right after must find them.
  await connection.flush();
  return service;
}

/** A client of the run service, for `polish status/list/cancel/extend/resume` and `polish run --nats`. */
export function createRunClient(connection: NatsConnection, options: { prefix?: string; timeoutMs?: number } = {}) {
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const call = async (operation: RunOperation, body: unknown) => {
    const message = await connection.request(runServiceSubject(operation, prefix), JSON.stringify(body), {
      timeout: options.timeoutMs ?? 30_000,
    });
    const reply = RunServiceReplySchema.parse(await resolveArtifacts(connection, message.json(), prefix));
    if (!reply.ok) throw new PolishError(reply.code === 'INTERNAL' ? 'INTERNAL' : 'INVALID_INPUT', reply.message);
    return reply;
  };
  const one = async (operation: RunOperation, body: unknown): Promise<RunSummary> => {
    const reply = await call(operation, body);
    if (!reply.ok || !reply.run) throw new PolishError('INTERNAL', `the run service sent no run for ${operation}`);
    return reply.run;
  };
  return {
    /** Whether a polish run service answers on this NATS. */
    async available(): Promise<boolean> {
      try {
        await connection.request(serviceDiscoverySubject('PING'), '', { timeout: 2_000 });
        return true;
      } catch {
        return false;
      }
    },
    submit: (spec: unknown, runId?: string) => one('submit', { spec, ...(runId ? { runId } : {}) }),
    status: (runId: string) => one('status', { runId }),
    list: async () => {
      const reply = await call('list', {});
      return reply.ok ? (reply.runs ?? []) : [];
    },
    cancel: (runId: string) => one('cancel', { runId }),
    extend: (runId: string, cap: number) => one('extend', { runId, cap }),
    resume: (runId: string) => one('resume', { runId }),
    /** Each role's task queue, as the run service's orchestrator sees it. */
    queues: async () => {
      const reply = await call('queues', {});
      return reply.ok ? (reply.queues ?? []) : [];
    },
  };
}
export type RunClient = ReturnType<typeof createRunClient>;

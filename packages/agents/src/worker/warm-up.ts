import type { NatsConnection } from '@nats-io/transport-node';
import { PROTOCOL_VERSION, TaskReplySchema, type TaskRole, type TaskEnvelope } from '@polish/protocol';
import { handleTask } from '../handle-task.js';
import { createScriptedProvider } from '../providers/scripted-provider.js';
import type { NatsClient } from './nats-client.js';

const criteria = [{ id: 'C1', text: 'warm-up criterion' }];

const acceptance = [{ id: 'A1', text: 'warm-up acceptance' }];
const files = { 'warm-up.txt': 'warm-up artifact' };
const parPlan = { plan_summary: 'warm up', action: 'nothing' };

const ANSWERS: Record<TaskRole, unknown> = {
  criteria: { criteria },
  evaluate: { scores: [{ criterion_id: 'C1', pass: false, gap: 'warm-up gap' }] },
  revise: { artifact: 'warm-up artifact, revised' },
  'par.plan': parPlan,
  'par.act': { changes: [], self_assessment: { passed: false, notes: 'warm-up' } },
  'par.review': { results: [{ id: 'A1', passed: false, evidence: 'warm-up' }] },
  'par.command': null,
};

function syntheticTask(role: TaskRole): TaskEnvelope {
  const common = { v: PROTOCOL_VERSION, taskId: 'warm-up', attempt: 1, deadline: 0 } as const;
  switch (role) {
    case 'criteria':
      return { ...common, role, payload: { artifact: 'warm-up artifact', goal: 'warm-up goal' } };
    case 'evaluate':
      return { ...common, role, payload: { artifact: 'warm-up artifact', criteria } };
    case 'revise':
      return {
        ...common,
        role,
        payload: { artifact: 'warm-up artifact', blocking_gaps: ['C1: warm-up gap'], goal: 'warm-up goal' },
      };
    case 'par.plan':
      return {
        ...common,
        role,
        payload: { goal: 'warm-up goal', acceptance_criteria: acceptance, artifact: files, history: [] },
      };
    case 'par.act':
      return {
        ...common,
        role,
        payload: { goal: 'warm-up goal', acceptance_criteria: acceptance, artifact: files, history: [], plan: parPlan },
      };
    case 'par.review':
      return { ...common, role, payload: { artifact: files, acceptance_criteria: acceptance } };
    case 'par.command':
      return { ...common, role, payload: { artifact: files, command: 'true', timeout_ms: 10_000 } };
  }
}

/** Runs one synthetic task of the role through the handler alone (no NATS), against a local scripted answer. */
export async function warmHandler(role: TaskRole): Promise<void> {
  const reply = await handleTask(
    syntheticTask(role),
    createScriptedProvider(() => ANSWERS[role]),
  );
  if (!reply.ok) throw new Error(`handler warm-up of ${role} failed: ${reply.error.message}`);
}

/**
 * Runs one synthetic task of the role through the whole path a real task takes (a NATS request
 * to a private inbox, the subscription iterator, envelope parse, prompt, JSON Schema,
 * validation, reply) against a local scripted answer, before the worker says it is ready. A
 * single-use process otherwise pays V8's cold start on the real task, inside the hop. Nothing
 * is kept, and no task subject is touched.
 */
export async function warmUp(
  role: TaskRole,
  connection: NatsConnection,
  createInbox: NatsClient['createInbox'],
  inboxPrefix?: string,
): Promise<void> {
  // The same path a real task takes, NATS included: request → subscription iterator → handler → respond.
  // Within the worker's own inbox prefix: the only subjects its NATS user may use besides its tasks.
  const subject = createInbox(inboxPrefix);
  const subscription = connection.subscribe(subject, { max: 1 });
  const served = (async () => {
    for await (const message of subscription) {
      const reply = await handleTask(
        message.json(),
        createScriptedProvider(() => ANSWERS[role]),
      );
      message.respond(JSON.stringify(reply));
    }
  })();
  const answer = await connection.request(subject, JSON.stringify(syntheticTask(role)), { timeout: 10_000 });
  await served;
  const reply = TaskReplySchema.parse(answer.json());
  if (!reply.ok) throw new Error(`worker warm-up failed: ${reply.error.message}`);
}

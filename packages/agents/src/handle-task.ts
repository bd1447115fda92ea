import { hostname } from 'node:os';
import {
  describeIssues,
  PROTOCOL_VERSION,
  PolishError,
  TaskEnvelopeSchema,
  ZERO_USAGE,
  type TaskRole,
  type TaskEnvelope,
  type TaskReply,
  type WorkerInfo,
} from '@polish/protocol';
import type { ModelProvider } from './providers/model-provider.js';
import { extractCriteria } from './handlers/extract-criteria.js';
import { evaluate } from './handlers/evaluate.js';
import { revise } from './handlers/revise.js';
import { act, plan, review } from './handlers/par.js';
import { runCritiqueCommand, type CommandSettings } from './handlers/critique-command.js';

/** The model each role uses: one for all, or one per role (e.g. an evaluator from another family). */
export type RoleModels = ModelProvider | Readonly<Partial<Record<TaskRole, ModelProvider>>>;

/** Roles that call no model (par.command) report this instead. */
const NO_MODEL: ModelProvider = {
  info: { provider: 'none', model: 'none', scripted: false },
  generate: () => Promise.reject(new PolishError('INTERNAL', 'this role calls no model')),
};

const modelFor = (models: RoleModels, role: TaskRole): ModelProvider =>
  'generate' in models ? (models as ModelProvider) : (models[role] ?? NO_MODEL);

function runHandler(task: TaskEnvelope, model: ModelProvider, command: CommandSettings) {
  switch (task.role) {
    case 'criteria':
      return extractCriteria(task.payload, model);
    case 'evaluate':
      return evaluate(task.payload, model);
    case 'revise':
      return revise(task.payload, model);
    case 'par.plan':
      return plan(task.payload, model);
    case 'par.act':
      return act(task.payload, model);
    case 'par.review':
      return review(task.payload, model);
    case 'par.command':
      return runCritiqueCommand(task.payload, process.env, command);
  }
}

/** This process, as a reply names it. */
export function currentWorker(): WorkerInfo {
  return { pid: process.pid, hostname: hostname() };
}

/**
 * Answers one task: validates the envelope (strict per-role payload, so unexpected fields are
 * rejected before any model is called), runs the role's handler, and wraps the outcome.
 * Never throws: failures become error replies with a code.
 */
export async function handleTask(
  raw: unknown,
  models: RoleModels,
  worker: WorkerInfo = currentWorker(),
  /** What the worker's operator allows critique commands (par.command). */
  command: CommandSettings = {},
): Promise<TaskReply> {
  const rawTaskId = (raw as { taskId?: unknown } | null)?.taskId;
  const taskId = typeof rawTaskId === 'string' && rawTaskId ? rawTaskId : 'unknown';
  const parsed = TaskEnvelopeSchema.safeParse(raw);
  if (!parsed.success) {
    const error = new PolishError(
      'INVALID_INPUT',
      `task rejected before any model call: ${describeIssues(parsed.error)}`,
    );
    return { v: PROTOCOL_VERSION, taskId, ok: false, error: error.toWire(), usage: ZERO_USAGE, worker };
  }
  const task = parsed.data;
  const model = task.role === 'par.command' ? NO_MODEL : modelFor(models, task.role);
  try {
    const output = await runHandler(task, model, command);
    return {
      v: PROTOCOL_VERSION,
      taskId,
      ok: true,
      // The model's own answer: the orchestrator validates it again and counts what it drops.
      result: 'answer' in output && output.answer !== undefined ? output.answer : output.value,
      usage: output.usage,
      model: model.info,
      worker,
    };
  } catch (error) {
    const polishError = PolishError.from(error);
    const message =
      polishError.code === 'INTERNAL' ? `${task.role} worker failed: ${polishError.message}` : polishError.message;
    const wire = { ...polishError.toWire(), message };
    return {
      v: PROTOCOL_VERSION,
      taskId,
      ok: false,
      error: wire,
      usage: polishError.usage ?? ZERO_USAGE,
      model: model.info,
      worker,
    };
  }
}

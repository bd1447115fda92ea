import type { z } from 'zod';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import {
  MAX_MODEL_CALLS_PER_TASK,
  describeIssues,
  PolishError,
  ZERO_USAGE,
  addUsage,
  readTolerantly,
  type TaskRole,
  type Usage,
} from '@polish/protocol';
import type {
  ContentPart,
  ModelMessage,
  ModelProvider,
  ModelRequest,
  ModelResponse,
} from './providers/model-provider.js';

/** No-op unless an OpenTelemetry SDK is registered (see telemetry.ts). */
const tracer = trace.getTracer('@polish/agents');

/** Re-asks after the first answer when it is invalid (DESIGN §1: bounded repair), within the protocol's bound on calls per task. */
export const DEFAULT_MAX_REPAIRS = MAX_MODEL_CALLS_PER_TASK - 1;

/**
 * Longest problem text a re-ask cites: a re-ask's size stays bounded (a budget reserves it in
 * advance), and the first problems are the ones to fix.
 */
export const MAX_CITED_PROBLEM_CHARS = 2_000;

/** What a handler asks for: one prompt, and the schema its answer must satisfy. */
export interface ValidatedRequest<T> {
  model: ModelProvider;
  role: TaskRole;
  system: string;
  prompt: string | ContentPart[];
  schema: z.ZodType<T>;
  /** JSON Schema of the answer, for providers with structured output (computed once per role, not per call). */
  jsonSchema: Record<string, unknown>;
  payload: Readonly<Record<string, unknown>>;
  maxRepairs?: number;
}

/** Models often wrap JSON in a Markdown fence; take what is inside. */
function unfence(text: string): string {
  const match = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/.exec(text);
  return match?.[1] ?? text;
}

/** The re-ask that cites why an answer was rejected. */
export const reaskText = (problem: string) =>
  `Your answer was rejected: ${problem}. Answer again with only the corrected JSON object.`;

/** What a handler gets back: the validated value, and the answer as the model gave it. */
export interface ValidatedAnswer<T> {
  value: T;
  /**
   * The model's JSON as it came, unknown fields included: what the worker replies with, so the
   * orchestrator (which drops them again before its own check) can count them in the events.
   */
  answer: unknown;
  usage: Usage;
}

function problemWith<T>(text: string, schema: z.ZodType<T>): { value: T; answer: unknown } | { problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(unfence(text));
  } catch (error) {
    return { problem: `the answer is not JSON (${(error as Error).message})` };
  }
  // Fields the schema does not know are dropped, not refused: the verdict is computed by code.
  const parsed = readTolerantly(schema, json);
  if (parsed.success) return { value: parsed.data, answer: json };
  const problem = describeIssues(parsed.error);
  return {
    problem:
      problem.length > MAX_CITED_PROBLEM_CHARS ? `${problem.slice(0, MAX_CITED_PROBLEM_CHARS)} (and more)` : problem,
  };
}

/**
 * One model call as a `polish.model.call` span, a child of the active span (the worker's
 * `polish.task <role>`). Attributes say which model answered and what it cost; never a prompt,
 * an answer or an error's text. A call outside any recorded trace (a worker's warm-up) starts
 * no trace of its own.
 */
function tracedGenerate(model: ModelProvider, call: ModelRequest, round: number): Promise<ModelResponse> {
  if (!trace.getActiveSpan()?.isRecording()) return model.generate(call);
  const attributes = {
    'polish.role': call.role,
    'polish.repair_round': round,
    'gen_ai.provider.name': model.info.provider,
    'gen_ai.request.model': model.info.model,
    'polish.model.scripted': model.info.scripted,
  };
  return tracer.startActiveSpan('polish.model.call', { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      const response = await model.generate(call);
      span.setAttributes({
        'gen_ai.usage.input_tokens': response.usage.input_tokens,
        'gen_ai.usage.output_tokens': response.usage.output_tokens,
        'polish.usage.cache_read_tokens': response.usage.cache_read_tokens,
        'polish.usage.cache_write_tokens': response.usage.cache_write_tokens,
      });
      return response;
    } catch (error) {
      const code = PolishError.from(error).code;
      span.setAttribute('error.type', code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * Asks the model, validates the answer with zod, and re-asks at most `maxRepairs` times
 * citing the validation error. Still invalid ⇒ `PolishError('CONTRACT_VIOLATION')`.
 */
export async function generateValidated<T>(request: ValidatedRequest<T>): Promise<ValidatedAnswer<T>> {
  const maxRepairs = request.maxRepairs ?? DEFAULT_MAX_REPAIRS;
  const messages: ModelMessage[] = [{ role: 'user', content: request.prompt }];
  let usage = ZERO_USAGE;
  for (let round = 0; ; round += 1) {
    let response;
    try {
      response = await tracedGenerate(
        request.model,
        {
          role: request.role,
          system: request.system,
          messages: [...messages],
          jsonSchema: request.jsonSchema,
          payload: request.payload,
        },
        round,
      );
    } catch (error) {
      // The repair rounds before the failure were paid for: keep their usage on the error.
      throw PolishError.from(error).withUsage(usage, request.model.info);
    }
    usage = addUsage(usage, response.usage);
    const outcome = problemWith(response.text, request.schema);
    if ('value' in outcome) return { value: outcome.value, answer: outcome.answer, usage };
    if (round >= maxRepairs) {
      throw new PolishError(
        'CONTRACT_VIOLATION',
        `${request.role} answer still invalid after ${maxRepairs} repair${maxRepairs === 1 ? '' : 's'}: ${outcome.problem}`,
        { usage, model: request.model.info },
      );
    }
    messages.push({ role: 'assistant', content: response.text }, { role: 'user', content: reaskText(outcome.problem) });
  }
}

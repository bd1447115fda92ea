import { z } from 'zod';
import type { ModelInfo, Usage } from './usage.js';

/**
 * Every failure that crosses a process boundary travels as one of these codes.
 * Retryability is decided here, once.
 */
export const ErrorCodeSchema = z.enum([
  'INVALID_INPUT', // the caller's spec, a file or a task payload is malformed
  'CONTRACT_VIOLATION', // an agent's answer stayed invalid after bounded repair
  'MODEL_ERROR', // the model provider failed (auth, exhausted retries, timeout)
  'NO_RESPONDERS', // nobody serves the role
  'TIMEOUT', // no reply before the task deadline
  'WORKER_CRASHED', // the worker process died holding the task
  'CANCELLED', // the caller cancelled the run
  'BUDGET_EXHAUSTED', // the run's budget cannot cover the next call's worst case
  'UNAVAILABLE', // polish cannot start what it needs: nats-server missing, NATS or JetStream unreachable, workers failing to boot
  'INTERNAL', // a bug: report it
]);
export type ErrorCode = z.infer<typeof ErrorCodeSchema>;

const RETRYABLE: ReadonlySet<ErrorCode> = new Set(['NO_RESPONDERS', 'TIMEOUT', 'WORKER_CRASHED']);

/** The wire form of an error. */
export const WireErrorSchema = z.strictObject({
  code: ErrorCodeSchema,
  message: z.string(),
  retryable: z.boolean(),
});
export type WireError = z.infer<typeof WireErrorSchema>;

/** What a PolishError may carry besides its code and message. */
export interface PolishErrorOptions {
  cause?: unknown;
  retryable?: boolean;
  usage?: Usage;
  model?: ModelInfo;
  /** INVALID_INPUT: the field, flag or file at fault (its message starts with it). */
  field?: string;
}

/** The one error class of polish: a code, a message, and whether retrying may help. */
export class PolishError extends Error {
  override readonly name = 'PolishError';
  readonly code: ErrorCode;
  readonly retryable: boolean;
  /** Model usage spent before the failure: failed work is still paid for, so it is still counted. */
  readonly usage: Usage | undefined;
  readonly model: ModelInfo | undefined;
  readonly field: string | undefined;

  constructor(code: ErrorCode, message: string, options?: PolishErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options?.retryable ?? RETRYABLE.has(code);
    this.usage = options?.usage;
    this.model = options?.model;
    this.field = options?.field;
  }

  /** The same error, carrying this usage (and the model that spent it). */
  withUsage(usage: Usage, model?: ModelInfo): PolishError {
    return new PolishError(this.code, this.message, {
      cause: this.cause,
      retryable: this.retryable,
      usage,
      ...((model ?? this.model) ? { model: model ?? this.model } : {}),
      ...(this.field ? { field: this.field } : {}),
    });
  }

  /** Encodes this error for a reply envelope. */
  toWire(): WireError {
    return { code: this.code, message: this.message, retryable: this.retryable };
  }

  /** Decodes an error from a reply envelope. */
  static fromWire(wire: WireError, usage?: Usage, model?: ModelInfo): PolishError {
    return new PolishError(wire.code, wire.message, {
      retryable: wire.retryable,
      ...(usage ? { usage } : {}),
      ...(model ? { model } : {}),
    });
  }

  /** Any thrown value as a PolishError (unknown errors become INTERNAL). */
  static from(error: unknown): PolishError {
    if (error instanceof PolishError) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new PolishError('INTERNAL', message, { cause: error });
  }
}

/** Bad input: the message names the field first (`cap: must be …`), so one line says what to fix. */
export function invalidInput(field: string, problem: string, options: { cause?: unknown } = {}): PolishError {
  return new PolishError('INVALID_INPUT', `${field}: ${problem}`, { ...options, field });
}

/** Whether an error is bad input (of a user, a file or a payload). */
export const isInvalidInput = (error: unknown): error is PolishError =>
  error instanceof PolishError && error.code === 'INVALID_INPUT';

/** A zod error's issues in one line: `path: message; path: message` (the root is `(root)`). */
export function describeIssues(error: {
  issues: readonly { path: readonly PropertyKey[]; message: string }[];
}): string {
  return error.issues.map((issue) => `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`).join('; ');
}

/** A zod error's first issue: its path (or `fallback` at the root) and message. */
export function firstIssue(
  error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] },
  fallback = '(root)',
): { path: string; message: string } {
  const issue = error.issues[0];
  return { path: issue?.path.map(String).join('.') || fallback, message: issue?.message ?? 'invalid' };
}

/** polish cannot start what it needs (nats-server missing, NATS unreachable, workers failing to boot). */
export function unavailable(message: string, options: { cause?: unknown } = {}): PolishError {
  return new PolishError('UNAVAILABLE', message, options);
}

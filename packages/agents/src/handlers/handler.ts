import { z } from 'zod';
import type { Usage } from '@polish/protocol';

/** A handler's validated result and the usage of every model call it made. */
export interface HandlerOutput<T> {
  value: T;
  usage: Usage;
  /** The model's answer as given (unknown fields included), sent instead of `value` when present. */
  answer?: unknown;
}

/** The JSON Schema of a role's answer, for providers with structured output. */
export function answerJsonSchema(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, { unrepresentable: 'any' }) as Record<string, unknown>;
}

import { z } from 'zod';

/** A run's spending limits: US dollars (priced from the price table) and/or tokens. */
export const BudgetSchema = z
  .strictObject({
    max_usd: z.number().positive('must be above 0').optional(),
    max_tokens: z.int('must be a whole number').positive('must be above 0').optional(),
  })
  .refine((budget) => budget.max_usd !== undefined || budget.max_tokens !== undefined, 'give max_usd or max_tokens');
export type Budget = z.infer<typeof BudgetSchema>;

/**
 * A role's model as a budget needs it: its `provider:model` key as the worker reports it (or
 * `provider:*`), and the most output tokens one of its calls may produce (its max_tokens).
 */
export const ModelLimitSchema = z.strictObject({
  model: z.string().regex(/^[a-z0-9-]+:.+$/, 'a model key looks like provider:model'),
  max_output_tokens: z.int().min(1).max(1_000_000),
});
export type ModelLimit = z.infer<typeof ModelLimitSchema>;

/** The models a run's roles use, declared so a budget can reserve their worst case before each call. */
export const DeclaredModelsSchema = z.strictObject({
  criteria: ModelLimitSchema.optional(),
  /** One per judge, or one for every judge. */
  evaluate: z.array(ModelLimitSchema).min(1).optional(),
  revise: ModelLimitSchema.optional(),
});
export type DeclaredModels = z.infer<typeof DeclaredModelsSchema>;

/**
 * Model calls one task may make: the first answer and its re-asks. polish's agents stay within
 * it (their repairs, and a reviser's fall-back to the whole text, share it); a budget reserves it.
 */
export const MAX_MODEL_CALLS_PER_TASK = 3;

/**
 * Bound, in tokens, on what a prompt adds to its payload: the system prompt, the framing of the
 * user turn, and the answer's JSON Schema. A token is at least one byte of text, so bytes bound
 * tokens; polish's agents keep their prompts below it (a test checks).
 */
export const PROMPT_OVERHEAD_TOKENS = 4_000;

/** Bound, in tokens, on a re-ask's own text (the cited problem is cut to fit), besides the answer it repeats. */
export const REASK_OVERHEAD_TOKENS = 2_500;

/**
 * The most input and output tokens one task may cost: {@link MAX_MODEL_CALLS_PER_TASK} calls,
 * each reading the payload and the prompt, and every earlier answer and re-ask of the task,
 * and each writing at most `maxOutputTokens`.
 */
export function worstCaseOfTask(
  payloadBytes: number,
  maxOutputTokens: number,
): { input_tokens: number; output_tokens: number } {
  let input = 0;
  for (let call = 0; call < MAX_MODEL_CALLS_PER_TASK; call += 1)
    input += payloadBytes + PROMPT_OVERHEAD_TOKENS + call * (maxOutputTokens + REASK_OVERHEAD_TOKENS);
  return { input_tokens: input, output_tokens: MAX_MODEL_CALLS_PER_TASK * maxOutputTokens };
}

import { z } from 'zod';

/** Token usage of one model call, or a sum of several. */
export const UsageSchema = z.strictObject({
  input_tokens: z.int().min(0),
  output_tokens: z.int().min(0),
  cache_read_tokens: z.int().min(0),
  cache_write_tokens: z.int().min(0),
  model_calls: z.int().min(0),
});
export type Usage = z.infer<typeof UsageSchema>;

/** Usage of nothing at all: the identity for {@link addUsage}. */
export const ZERO_USAGE: Usage = Object.freeze({
  input_tokens: 0,
  output_tokens: 0,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  model_calls: 0,
});

/** Sum of two usages. */
export function addUsage(a: Usage, b: Usage): Usage {
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    cache_read_tokens: a.cache_read_tokens + b.cache_read_tokens,
    cache_write_tokens: a.cache_write_tokens + b.cache_write_tokens,
    model_calls: a.model_calls + b.model_calls,
  };
}

/** Which model answered. `scripted: true` marks answers that came from a script, not an LLM. */
export const ModelInfoSchema = z.strictObject({
  provider: z.string().min(1),
  model: z.string().min(1),
  scripted: z.boolean(),
});
export type ModelInfo = z.infer<typeof ModelInfoSchema>;

/** Prices of one model in US dollars per million tokens. */
export const ModelPriceSchema = z.strictObject({
  input: z.number().min(0),
  output: z.number().min(0),
  cache_read: z.number().min(0).optional(),
  cache_write: z.number().min(0).optional(),
});
export type ModelPrice = z.infer<typeof ModelPriceSchema>;

/** Prices keyed by `provider:model` (or `provider:*` for every model of a provider). */
export const PriceTableSchema = z.record(z.string(), ModelPriceSchema);
export type PriceTable = z.infer<typeof PriceTableSchema>;

/** The key usage and prices are filed under. */
export const modelKey = (model: Pick<ModelInfo, 'provider' | 'model'>) => `${model.provider}:${model.model}`;

import type { PriceTable } from '@polish/protocol';

/**
 * Default prices in US dollars per million tokens, as published by the providers when this
 * table was written. Override or extend them with `prices:` in the config file; a model with no
 * price gets no cost estimate (null), never a made-up one.
 */
export const DEFAULT_PRICES: PriceTable = {
  'anthropic:claude-opus-4-5': { input: 5, output: 25, cache_read: 0.5, cache_write: 6.25 },
  'anthropic:claude-sonnet-4-5': { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
  'anthropic:claude-haiku-4-5': { input: 1, output: 5, cache_read: 0.1, cache_write: 1.25 },
  'openai:gpt-4.1': { input: 2, output: 8, cache_read: 0.5 },
  'openai:gpt-4.1-mini': { input: 0.4, output: 1.6, cache_read: 0.1 },
  // A server on this machine and scripted answers have no per-token bill. Other
  // OpenAI-compatible endpoints have no default price: their cost shows as unknown.
  'local:*': { input: 0, output: 0 },
  'scripted:*': { input: 0, output: 0 },
};

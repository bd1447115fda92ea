import type { PriceTable } from '@polish/protocol';

/**
 * Default prices in US dollars per million tokens, as published by the providers when this
 * table was written (December 2026). Override or extend them with `prices:` in the config file;
 * a model with no price gets no cost estimate (null), never a made-up one. Claude Haiku 5.5 is
 * left out: its price depends on the prompt's length (over 100k tokens costs more), which one
 * row cannot say.
 */
export const DEFAULT_PRICES: PriceTable = {
  // Opus 5.5's cache read is 0.05× its input price (not the usual 0.1×), as published.
  'anthropic:claude-opus-5-5': { input: 4, output: 20, cache_read: 0.2, cache_write: 5 },
  'anthropic:claude-sonnet-5-5': { input: 2, output: 10, cache_read: 0.2, cache_write: 2.5 },
  // Older models (Sonnet 4.5 reached end of life on 2026-11-30, Opus 4.5 does on 2027-01-22).
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

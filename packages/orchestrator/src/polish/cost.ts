import type { Cost, ModelPrice, PriceTable, Usage } from '@polish/protocol';

const PER_MILLION = 1_000_000;

/** US dollars of some usage at one model's price (cached tokens at their own prices, else the input price). */
export function dollarsOf(usage: Usage, price: ModelPrice): number {
  return (
    (usage.input_tokens * price.input +
      usage.output_tokens * price.output +
      usage.cache_read_tokens * (price.cache_read ?? price.input) +
      usage.cache_write_tokens * (price.cache_write ?? price.input)) /
    PER_MILLION
  );
}

/**
 * Estimates the cost of the usage of each model (keyed `provider:model`) from a price table
 * (US dollars per million tokens; `provider:*` prices every model of a provider). A model
 * without a price costs null, and so does the total then: an unknown is never shown as zero.
 */
export function estimateCost(usageByModel: Readonly<Record<string, Usage>>, prices: PriceTable): Cost {
  const byModel: Record<string, number | null> = {};
  let total: number | null = 0;
  for (const [key, usage] of Object.entries(usageByModel)) {
    const price = prices[key] ?? prices[`${key.split(':')[0]}:*`];
    if (!price) {
      byModel[key] = null;
      total = null;
      continue;
    }
    const dollars = dollarsOf(usage, price);
    byModel[key] = dollars;
    if (total !== null) total += dollars;
  }
  return { currency: 'USD', total, by_model: byModel };
}

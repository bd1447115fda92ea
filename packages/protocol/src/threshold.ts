import { z } from 'zod';

/** `pass_all` (default) or `pass_N`: at least N criteria pass. */
export const ThresholdSchema = z.string().regex(/^(pass_all|pass_[0-9]+)$/, 'must be pass_all or pass_N (e.g. pass_3)');
export type Threshold = z.infer<typeof ThresholdSchema>;

/** How many passing criteria a threshold requires, given the locked criteria count. */
export function requiredPasses(threshold: Threshold, criteriaCount: number): number {
  return threshold === 'pass_all' ? criteriaCount : Number(threshold.slice('pass_'.length));
}

import { InputError } from './input-error.js';

/** Parses a whole-number flag within bounds, or throws an InputError naming it. */
export function parseWholeNumber(field: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\s*[0-9]+\s*$/.test(raw) || value < min || value > max) {
    throw new InputError(field, `must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** Parses a duration flag given in seconds (decimals allowed) into milliseconds. */
export function parseSeconds(field: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new InputError(field, `must be a number of seconds above 0, got "${raw}"`);
  return Math.round(value * 1000);
}

import { invalidInput } from '@polish/protocol';
/** Parses a whole-number flag within bounds, or throws INVALID_INPUT naming it. */
export function parseWholeNumber(field: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\s*[0-9]+\s*$/.test(raw) || value < min || value > max) {
    throw invalidInput(field, `must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** Longest duration a flag may name: one day (timers overflow past about 24.8 days). */
const MAX_SECONDS = 86_400;

/** Parses a duration flag given in seconds (decimals allowed, 0.01 to 86400) into milliseconds. */
export function parseSeconds(field: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\s*[0-9.]+\s*$/.test(raw) || !Number.isFinite(value) || value < 0.01 || value > MAX_SECONDS) {
    throw invalidInput(field, `must be a number of seconds from 0.01 to ${MAX_SECONDS}, got "${raw}"`);
  }
  return Math.round(value * 1000);
}

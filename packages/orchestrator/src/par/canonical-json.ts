/**
 * Canonical JSON as the agent-collab harness writes it (Python's
 * `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`): keys sorted
 * at every level, no spaces, non-ASCII text as it is. Integers and strings match exactly; a
 * float that Python prints as `600.0` is read by JavaScript as 600 and printed `600`.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, inner]) => inner !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, inner]) => `${JSON.stringify(key)}:${canonicalJson(inner)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A value with the keys of every object sorted, as `json.dumps(sort_keys=True)` orders them. */
export function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([key, inner]) => [key, sortedKeys(inner)]),
    );
  return value;
}

/** JSON as the harness prints and stores it (`indent=2, sort_keys=True`), with a final newline. */
export const prettySortedJson = (value: unknown) => `${JSON.stringify(sortedKeys(value), null, 2)}\n`;

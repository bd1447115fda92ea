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

import type { z } from 'zod';

/** How a model's answer read: the valid value and the unknown fields dropped, or the issues left. */
export type TolerantRead<T> =
  { success: true; data: T; dropped: string[] } | { success: false; error: z.ZodError; dropped: string[] };

/** Rounds of dropping: enough for unknown fields nested a few levels deep. */
const MAX_ROUNDS = 8;

function at(value: unknown, path: readonly PropertyKey[]): unknown {
  let current = value;
  for (const key of path) current = (current as Record<PropertyKey, unknown> | null)?.[key];
  return current;
}

/**
 * Validates a model's answer against a strict schema, first dropping the fields the schema does
 * not know (a model adding `overall` or `blocking_gaps` to its scores, say): the verdict is
 * computed by code anyway, so extra fields are noise, not a broken contract. Anything else that
 * is wrong (a missing, repeated or invented criterion id, a wrong type) still fails. `dropped`
 * lists the paths removed (`overall`, `scores.0.confidence`), for the run's events.
 */
export function readTolerantly<T>(schema: z.ZodType<T>, answer: unknown): TolerantRead<T> {
  let current = answer;
  const dropped: string[] = [];
  for (let round = 0; ; round += 1) {
    // jitless: the schemas read here are mostly made per task (the locked criteria, the artifact
    // a quote must be in), and zod's JIT would compile each one anew for a single parse, costly
    // in a fresh worker process (docs/benchmarks.md); without it a hot parse costs about the same.
    const parsed = schema.safeParse(current, { jitless: true });
    if (parsed.success) return { success: true, data: parsed.data, dropped };
    const unknown = parsed.error.issues.filter((issue) => issue.code === 'unrecognized_keys');
    if (unknown.length === 0 || round >= MAX_ROUNDS) return { success: false, error: parsed.error, dropped };
    if (round === 0) current = structuredClone(answer);
    for (const issue of unknown) {
      const holder = at(current, issue.path) as Record<string, unknown> | undefined;
      for (const key of issue.keys) {
        if (holder && typeof holder === 'object') delete holder[key];
        dropped.push([...issue.path.map(String), key].join('.'));
      }
    }
  }
}

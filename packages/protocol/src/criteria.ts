import { z } from 'zod';

/** Most criteria Wave 1 may lock (DESIGN §1). */
export const MAX_CRITERIA = 8;

/** One falsifiable criterion, e.g. `{ id: "C1", text: "Every claim cites a source" }`. */
export const CriterionSchema = z.strictObject({
  id: z.string().regex(/^C[1-9][0-9]*$/, 'a criterion id looks like "C1"'),
  text: z
    .string()
    .min(1, 'must not be empty')
    .refine((text) => text.trim().length > 0, 'must not be empty'),
});
export type Criterion = z.infer<typeof CriterionSchema>;

/** 1..8 criteria with unique ids: the list Wave 1 locks or the caller supplies. */
export const CriteriaListSchema = z
  .array(CriterionSchema)
  .min(1, 'at least 1 criterion is needed')
  .max(MAX_CRITERIA, `at most ${MAX_CRITERIA} criteria are allowed`)
  .superRefine((criteria, ctx) => {
    const seen = new Set<string>();
    criteria.forEach((criterion, index) => {
      if (seen.has(criterion.id)) {
        ctx.addIssue({ code: 'custom', path: [index, 'id'], message: `duplicate criterion id ${criterion.id}` });
      }
      seen.add(criterion.id);
    });
  });

/** What a Wave 1 (criteria) agent returns. */
export const CriteriaResultSchema = z.strictObject({ criteria: CriteriaListSchema });
export type CriteriaResult = z.infer<typeof CriteriaResultSchema>;

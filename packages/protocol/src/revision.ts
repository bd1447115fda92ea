import { z } from 'zod';

/** What a Wave 3 (revise) agent returns: the full revised artifact, not a diff. */
export const RevisionSchema = z.strictObject({
  artifact: z
    .string()
    .min(1, 'the revised artifact must not be empty')
    .refine((text) => text.trim().length > 0, 'the revised artifact must not be empty'),
});
export type Revision = z.infer<typeof RevisionSchema>;

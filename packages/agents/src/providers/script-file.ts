import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { firstIssue, PolishError } from '@polish/protocol';

const AnswerSchema = z.union([z.string(), z.record(z.string(), z.unknown())]);

/** Conditions on the task payload; every one given must hold. */
const WhenSchema = z.strictObject({
  artifact_contains: z.string().optional(),
  artifact_not_contains: z.string().optional(),
  goal_contains: z.string().optional(),
  gaps_contain: z.string().optional(),
  /** PAR: how many earlier cycles the agent is shown (0 on the first cycle). */
  history_length: z.int().min(0).optional(),
  /** PAR: text the agent's earlier plan summaries or critiques contain. */
  history_contains: z.string().optional(),
  /** PAR: text one of the approved lessons given to the planner contains. */
  lessons_contain: z.string().optional(),
});

const RuleSchema = z
  .strictObject({
    when: WhenSchema.optional(),
    /** One answer for every round. */
    answer: AnswerSchema.optional(),
    /** One answer per repair round: the first answer, then the answer to the first re-ask, … (the last repeats). */
    answers: z.array(AnswerSchema).min(1).optional(),
    /** Wait this long before answering, to stand in for a slow model. */
    delay_ms: z.int().min(0).max(600_000).optional(),
    /** Work this long on the CPU first (no I/O wait), to stand in for an answer that costs CPU. */
    busy_ms: z.int().min(0).max(60_000).optional(),
    /** Wait until this file exists before answering: lets a test decide when a "model" answers. */
    hold_until_file: z.string().min(1).optional(),
  })
  .refine(
    (rule) => (rule.answer === undefined) !== (rule.answers === undefined),
    'a rule has exactly one of answer or answers',
  );

/**
 * A scripted model's answers, per role, as an ordered list of rules: the first rule whose
 * `when` matches the task payload answers. Answers that are objects are sent as JSON;
 * strings are sent as they are (to script invalid output).
 */
export const ScriptFileSchema = z.strictObject({
  name: z.string().min(1).optional(),
  criteria: z.array(RuleSchema).optional(),
  evaluate: z.array(RuleSchema).optional(),
  revise: z.array(RuleSchema).optional(),
  'par.plan': z.array(RuleSchema).optional(),
  'par.act': z.array(RuleSchema).optional(),
  'par.review': z.array(RuleSchema).optional(),
});
export type ScriptFile = z.infer<typeof ScriptFileSchema>;
export type ScriptRule = z.infer<typeof RuleSchema>;

/** Reads and validates a script file (YAML or JSON). Throws `INVALID_INPUT` naming the problem. */
export function loadScriptFile(path: string): ScriptFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new PolishError('INVALID_INPUT', `script: cannot read ${path}: ${(error as Error).message}`);
  }
  return parseScriptFile(text, path);
}

/** Parses and validates a script file's text (YAML or JSON); `path` names it in errors. */
export function parseScriptFile(text: string, path: string): ScriptFile {
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (error) {
    throw new PolishError('INVALID_INPUT', `script: ${path} is not valid YAML or JSON: ${(error as Error).message}`);
  }
  const parsed = ScriptFileSchema.safeParse(document);
  if (!parsed.success) {
    const issue = firstIssue(parsed.error);
    throw new PolishError('INVALID_INPUT', `script: ${path}: ${issue.path}: ${issue.message}`);
  }
  return { name: parsed.data.name ?? path.split('/').at(-1) ?? path, ...parsed.data };
}

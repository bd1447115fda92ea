import { readFileSync } from 'node:fs';
import { invalidInput, CriteriaListSchema, RunSpecSchema, type DeclaredModels, type RunSpec } from '@polish/protocol';

/** The `polish run` flags that make up a run spec. */
export interface SpecFlags {
  goal?: string;
  criteria?: string;
  threshold?: string;
  cap?: string;
  /** How Wave 3 answers: auto (default), edits or full. */
  reviseMode?: string;
  /** How a quorum decides a criterion: majority (default), unanimous, any-fail. */
  quorum?: string;
  /** Passes quote their evidence (commander's --no-evidence sets false). */
  evidence?: boolean;
  maxUsd?: string;
  maxTokens?: string;
}

/** What the run spec takes from elsewhere than the flags: the judges, and the models a budget prices. */
export interface SpecExtras {
  judges?: number;
  /** Over NATS: each judge's model, whose lane its tasks go to. */
  judge_models?: string[];
  models?: DeclaredModels;
}

/**
 * Reads a text file (or standard input) as UTF-8, refusing bytes that are not: replacing them
 * with U+FFFD would make the output differ from the input with nothing revised.
 */
function readText(field: string, path: string): string {
  const name = path === '-' ? 'standard input' : path;
  let bytes: Buffer;
  try {
    bytes = readFileSync(path === '-' ? 0 : path);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw invalidInput(field, `cannot read ${name} (${reason})`);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    const at = firstInvalidUtf8(bytes);
    throw invalidInput(
      field,
      `${name} is not valid UTF-8 (byte ${at}); polish keeps text byte for byte, so convert it first`,
    );
  }
}

/** The offset of the first byte that does not start or continue a valid UTF-8 sequence. */
function firstInvalidUtf8(bytes: Buffer): number {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let low = 0;
  let high = bytes.length;
  // The longest valid prefix, by halving (decode is all or nothing).
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    try {
      decoder.decode(bytes.subarray(0, middle));
      low = middle;
    } catch {
      high = middle - 1;
    }
  }
  return low;
}

function readCriteria(path: string): unknown {
  const text = readText('criteria', path);
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw invalidInput('criteria', `${path} is not JSON (${(error as Error).message})`);
  }
  // Accept a bare list or a criteria result ({ "criteria": [...] }).
  const list = Array.isArray(document) ? document : (document as { criteria?: unknown } | null)?.criteria;
  const parsed = CriteriaListSchema.safeParse(list);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const [index, key] = issue?.path ?? [];
    const where = index === undefined ? '' : `[${String(index)}]${key === undefined ? '' : `.${String(key)}`}`;
    throw invalidInput(`criteria${where}`, `${issue?.message ?? 'invalid'} (in ${path})`);
  }
  return parsed.data;
}

function parseBudget(flags: SpecFlags): { max_usd?: number; max_tokens?: number } | undefined {
  const usd = flags.maxUsd === undefined ? undefined : Number(flags.maxUsd);
  if (usd !== undefined && (!/^\s*[0-9]*\.?[0-9]+\s*$/.test(flags.maxUsd ?? '') || !(usd > 0)))
    throw invalidInput('max-usd', `must be an amount of US dollars above 0, e.g. 0.50, got "${flags.maxUsd}"`);
  const tokens = flags.maxTokens === undefined ? undefined : Number(flags.maxTokens);
  if (tokens !== undefined && (!/^\s*[0-9]+\s*$/.test(flags.maxTokens ?? '') || !(tokens > 0)))
    throw invalidInput('max-tokens', `must be a whole number of tokens above 0, got "${flags.maxTokens}"`);
  if (usd === undefined && tokens === undefined) return undefined;
  return { ...(usd === undefined ? {} : { max_usd: usd }), ...(tokens === undefined ? {} : { max_tokens: tokens }) };
}

function parseCap(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[0-9]+$/.test(raw.trim())) throw invalidInput('cap', `must be a whole number from 1 to 8, got "${raw}"`);
  return Number(raw);
}

/** The flag a spec field is given with, where their names differ. */
const FLAG_OF_FIELD: Record<string, string> = {
  revise_mode: 'revise-mode',
  judges: 'evaluators',
  judge_models: 'evaluators',
};

/** Reads the artifact and flags into a validated run spec, or throws INVALID_INPUT naming the field. */
export function readSpec(artifactPath: string, flags: SpecFlags, extras: SpecExtras = {}): RunSpec {
  if (flags.goal === undefined || flags.goal.trim() === '')
    throw invalidInput('goal', 'required: pass --goal "what the artifact must achieve"');
  const cap = parseCap(flags.cap);
  const budget = parseBudget(flags);
  const criteria = flags.criteria === undefined ? undefined : readCriteria(flags.criteria);
  const artifact = readText('artifact', artifactPath);
  const parsed = RunSpecSchema.safeParse({
    artifact,
    goal: flags.goal,
    ...(criteria === undefined ? {} : { criteria }),
    ...(flags.threshold === undefined ? {} : { threshold: flags.threshold }),
    ...(cap === undefined ? {} : { cap }),
    ...(flags.reviseMode === undefined ? {} : { revise_mode: flags.reviseMode }),
    ...(flags.quorum === undefined ? {} : { quorum: flags.quorum }),
    ...(flags.evidence === undefined ? {} : { evidence: flags.evidence }),
    ...(extras.judges === undefined ? {} : { judges: extras.judges }),
    ...(budget ? { budget } : {}),
    ...(extras.models ? { models: extras.models } : {}),
    ...(extras.judge_models ? { judge_models: extras.judge_models } : {}),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = String(issue?.path[0] ?? 'spec');
    throw invalidInput(FLAG_OF_FIELD[field] ?? field, issue?.message ?? 'invalid');
  }
  return parsed.data;
}

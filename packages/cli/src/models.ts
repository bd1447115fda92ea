import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import {
  declaredModelOf,
  keyVariableFor,
  loadScriptFile,
  missingKeyMessage,
  parseModelSpec,
  formatModelSettings,
  type ModelSettings,
} from '@polish/agents';
import {
  firstIssue,
  invalidInput,
  PolishError,
  PriceTableSchema,
  MAX_JUDGES,
  type DeclaredModels,
  type PriceTable,
  type ReviseMode,
  type Role,
  type TaskRole,
} from '@polish/protocol';
import { DEFAULT_PRICES } from './default-prices.js';

/** Used when no model is configured anywhere. */
export const DEFAULT_MODEL = 'anthropic:claude-sonnet-5-5';

/** The model flags of `polish run` and `polish worker`. */
export interface ModelFlags {
  model?: string;
  criteriaModel?: string;
  evaluatorModel?: string;
  reviserModel?: string;
  /** Plan-act-reflect: the agent that plans and acts, and the stateless reviewer. */
  actorModel?: string;
  reviewerModel?: string;
  /** `--provider scripted --script file` is the same as `--model scripted:file`. */
  provider?: string;
  script?: string;
  config?: string;
}

/** The config file (`--config` or `POLISH_CONFIG`), YAML or JSON. */
const ConfigFileSchema = z.strictObject({
  model: z.string().optional(),
  criteria_model: z.string().optional(),
  evaluator_model: z.string().optional(),
  reviser_model: z.string().optional(),
  actor_model: z.string().optional(),
  reviewer_model: z.string().optional(),
  max_tokens: z.int().min(1).optional(),
  timeout_seconds: z.number().positive().optional(),
  max_retries: z.int().min(0).max(10).optional(),
  prices: PriceTableSchema.optional(),
  /** A quorum's judges, one model spec each (like --evaluators). */
  evaluators: z.array(z.string()).min(1).optional(),
});
type ConfigFile = z.infer<typeof ConfigFileSchema>;

/** Every role's model, and the prices for the cost estimate. */
export interface ResolvedModels {
  byRole: Partial<Record<TaskRole, ModelSettings>>;
  prices: PriceTable;
}

/** The polish loop's roles: what `polish run` and a default `polish worker` need models for. */
export const POLISH_ROLES: readonly Role[] = ['criteria', 'evaluate', 'revise'];

/** Roles that call a model, and where each one's own setting is read from. */
const ROLE_SOURCES: Record<
  Exclude<TaskRole, 'par.command'>,
  { flag: keyof ModelFlags; env: string; config: keyof ConfigFile }
> = {
  criteria: { flag: 'criteriaModel', env: 'POLISH_CRITERIA_MODEL', config: 'criteria_model' },
  evaluate: { flag: 'evaluatorModel', env: 'POLISH_EVALUATOR_MODEL', config: 'evaluator_model' },
  revise: { flag: 'reviserModel', env: 'POLISH_REVISER_MODEL', config: 'reviser_model' },
  'par.plan': { flag: 'actorModel', env: 'POLISH_ACTOR_MODEL', config: 'actor_model' },
  'par.act': { flag: 'actorModel', env: 'POLISH_ACTOR_MODEL', config: 'actor_model' },
  'par.review': { flag: 'reviewerModel', env: 'POLISH_REVIEWER_MODEL', config: 'reviewer_model' },
};

function readConfig(path: string | undefined): ConfigFile {
  if (!path) return {};
  let document: unknown;
  try {
    document = parseYaml(readFileSync(path, 'utf8'));
  } catch (error) {
    throw invalidInput('config', `cannot read ${path}: ${(error as Error).message}`);
  }
  const parsed = ConfigFileSchema.safeParse(document ?? {});
  if (!parsed.success) {
    const issue = firstIssue(parsed.error);
    throw invalidInput('config', `${path}: ${issue.path}: ${issue.message}`);
  }
  return parsed.data;
}

function generalFlag(flags: ModelFlags): string | undefined {
  if (flags.model) return flags.model;
  if (flags.provider && flags.provider !== 'scripted')
    throw invalidInput('provider', `unknown provider "${flags.provider}": use --model provider:model`);
  if (flags.script) return `scripted:${flags.script}`;
  if (flags.provider === 'scripted')
    throw invalidInput('script', 'required with --provider scripted: pass --script answers.yaml');
  return undefined;
}

/**
 * Resolves each role's model. For every role the first of these wins: its own flag
 * (`--evaluator-model`), `--model`, its own variable (`POLISH_EVALUATOR_MODEL`), `POLISH_MODEL`,
 * its own config key (`evaluator_model`), the config's `model`, then the default. Scripts are
 * loaded and keys checked here, so nothing starts with a model that cannot work.
 */
/** Call settings the config file gives every model (max_tokens, timeout, retries). */
function callSettingsOf(config: ConfigFile) {
  return {
    ...(config.max_tokens === undefined ? {} : { maxTokens: config.max_tokens }),
    ...(config.timeout_seconds === undefined ? {} : { timeoutMs: Math.round(config.timeout_seconds * 1000) }),
    ...(config.max_retries === undefined ? {} : { maxRetries: config.max_retries }),
  };
}

export function resolveModels(
  flags: ModelFlags,
  environment: NodeJS.ProcessEnv = process.env,
  roles: readonly TaskRole[] = POLISH_ROLES,
  /** Check keys and scripts (off when the models only declare what workers elsewhere use). */
  { check = true }: { check?: boolean } = {},
): ResolvedModels {
  const config = readConfig(flags.config ?? environment.POLISH_CONFIG);
  const extra = callSettingsOf(config);
  const general = generalFlag(flags);
  const entries = roles.map((role) => {
    // par.command runs a shell command: it has no model to configure.
    if (role === 'par.command') return [role, { provider: 'none' as const }] as const;
    const source = ROLE_SOURCES[role];
    const candidates: [string, string | undefined][] = [
      [`--${source.flag.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`, flags[source.flag]],
      ['--model', general],
      [source.env, environment[source.env]],
      ['POLISH_MODEL', environment.POLISH_MODEL],
      [`config ${source.config}`, config[source.config] as string | undefined],
      ['config model', config.model],
    ];
    const [field, spec] = candidates.find(([, value]) => value) ?? ['model', DEFAULT_MODEL];
    try {
      return [role, parseModelSpec(spec ?? DEFAULT_MODEL, extra)] as const;
    } catch (error) {
      throw invalidInput(field, (error as Error).message);
    }
  });
  const byRole = Object.fromEntries(entries) as Partial<Record<TaskRole, ModelSettings>>;
  if (check) for (const settings of new Set(Object.values(byRole))) checkUsable(settings, byRole, environment);
  return { byRole, prices: { ...DEFAULT_PRICES, ...config.prices } };
}

function checkUsable(
  settings: ModelSettings,
  byRole: Partial<Record<TaskRole, ModelSettings>>,
  environment: NodeJS.ProcessEnv,
): void {
  if (settings.provider === 'none') return;
  if (settings.provider === 'scripted') {
    try {
      loadScriptFile(settings.script);
    } catch (error) {
      if (error instanceof PolishError) throw invalidInput('script', error.message.replace(/^script: /, ''));
      throw error;
    }
    return;
  }
  const variable = keyVariableFor(settings);
  if (variable && !environment[variable]) {
    const roles = (Object.entries(byRole) as [TaskRole, ModelSettings][])
      .filter(([, other]) => formatModelSettings(other) === formatModelSettings(settings))
      .map(([role]) => role);
    throw invalidInput(
      variable,
      missingKeyMessage(variable, `${formatModelSettings(settings)} (used by ${roles.join(', ')})`),
    );
  }
}

/**
 * A quorum's judges, one model each: `--evaluators SPEC,SPEC,…`, else the config's
 * `evaluators:`; none when neither names any. Keys and scripts are checked like every model's.
 */
export function resolveJudges(
  flags: ModelFlags & { evaluators?: string },
  environment: NodeJS.ProcessEnv = process.env,
  { check = true }: { check?: boolean } = {},
): ModelSettings[] | undefined {
  const config = readConfig(flags.config ?? environment.POLISH_CONFIG);
  const specs =
    flags.evaluators
      ?.split(',')
      .map((spec) => spec.trim())
      .filter(Boolean) ?? config.evaluators;
  if (!specs) return undefined;
  const field = flags.evaluators === undefined ? 'config evaluators' : 'evaluators';
  if (specs.length === 0 || specs.length > MAX_JUDGES)
    throw invalidInput(field, `name 1 to ${MAX_JUDGES} model specs, comma-separated`);
  const judges = specs.map((spec) => {
    try {
      return parseModelSpec(spec, callSettingsOf(config));
    } catch (error) {
      throw invalidInput(field, (error as Error).message);
    }
  });
  const byJudge = Object.fromEntries(judges.map((settings) => ['evaluate', settings])) as Partial<
    Record<TaskRole, ModelSettings>
  >;
  if (check) for (const settings of judges) checkUsable(settings, byJudge, environment);
  return judges;
}

/**
 * The models a run's budget prices, as their workers will report them: each role's, and each
 * judge's (`judges`, else the evaluate role's).
 */
export function declareModels(
  byRole: Partial<Record<TaskRole, ModelSettings>>,
  judges?: readonly ModelSettings[],
): DeclaredModels {
  const declared = (role: TaskRole) => {
    const settings = byRole[role];
    return settings && settings.provider !== 'none' ? { [role]: declaredModelOf(settings) } : {};
  };
  const evaluators = judges ?? (byRole.evaluate ? [byRole.evaluate] : []);
  return {
    ...declared('criteria'),
    ...declared('revise'),
    ...(evaluators.length > 0 ? { evaluate: evaluators.map(declaredModelOf) } : {}),
  };
}

/** The price table alone (defaults, then the config file's `prices:`), for runs whose workers are elsewhere. */
export function resolvePrices(
  flags: Pick<ModelFlags, 'config'>,
  environment: NodeJS.ProcessEnv = process.env,
): PriceTable {
  return { ...DEFAULT_PRICES, ...readConfig(flags.config ?? environment.POLISH_CONFIG).prices };
}

/** One line per distinct model: which roles use it. */
export function describeModels(byRole: Partial<Record<TaskRole, ModelSettings>>): string[] {
  const roles = new Map<string, TaskRole[]>();
  for (const [role, settings] of Object.entries(byRole) as [TaskRole, ModelSettings][]) {
    if (settings.provider === 'none') continue;
    const key = formatModelSettings(settings);
    roles.set(key, [...(roles.get(key) ?? []), role]);
  }
  return [...roles].map(
    ([model, users]) =>
      `${users.join(', ')}: ${model}${model.startsWith('scripted:') ? ' (SCRIPTED, not an LLM)' : ''}`,
  );
}

/** How a run asks its agents to answer: the reviser's form and the evaluator's evidence. */
export interface AnswerFlags {
  revise?: ReviseMode;
  evidence?: boolean;
}

/**
 * Each role's model with the answer settings a run asks for: the reviser answers in the run's
 * form (edits or full text) and the evaluator quotes evidence or not. These reach a worker with
 * its model settings, as everything a worker knows does: the payloads stay as they are.
 */
export function withAnswers(
  byRole: Partial<Record<TaskRole, ModelSettings>>,
  answers: AnswerFlags,
): Partial<Record<TaskRole, ModelSettings>> {
  const styled = { ...byRole };
  const set = (role: TaskRole, style: NonNullable<AnswerFlags>) => {
    const settings = styled[role];
    if (!settings || settings.provider === 'none') return;
    styled[role] = { ...settings, answers: { ...settings.answers, ...style } };
  };
  if (answers.revise !== undefined) set('revise', { revise: answers.revise });
  if (answers.evidence !== undefined) set('evaluate', { evidence: answers.evidence });
  return styled;
}

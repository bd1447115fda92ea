import { basename, extname } from 'node:path';
import { firstIssue, PolishError } from '@polish/protocol';
import { ModelSettingsSchema, type ModelSettings } from './model-settings.js';
import { displayUrl, providerLabel } from './display-url.js';
import { DEFAULT_MAX_TOKENS } from './sdk-options.js';
import { loadScriptFile } from './script-file.js';

/** Where Ollama serves its OpenAI-compatible API by default. */
export const OLLAMA_BASE_URL = 'http://127.0.0.1:11434/v1';

/**
 * Parses a model spec of the form `provider:model[@baseURL]`:
 * `anthropic:claude-sonnet-5-5`, `openai:gpt-4.1-mini`, `openai:qwen2.5@http://127.0.0.1:8000/v1`,
 * `ollama:llama3.1` (OpenAI-compatible at Ollama's default address), `scripted:answers.yaml`.
 * Throws `INVALID_INPUT` naming what is wrong.
 */
export function parseModelSpec(
  spec: string,
  extra: Partial<Pick<ModelSettings & { provider: 'anthropic' }, 'maxTokens' | 'timeoutMs' | 'maxRetries'>> = {},
): ModelSettings {
  const match = /^([a-z-]+):(.+)$/.exec(spec.trim());
  if (!match)
    throw new PolishError(
      'INVALID_INPUT',
      `"${spec}" is not a model spec: use provider:model, e.g. anthropic:claude-sonnet-5-5, ollama:llama3.1 or scripted:answers.yaml`,
    );
  const [, provider, rest = ''] = match;
  if (provider === 'scripted') return { provider: 'scripted', script: rest };
  const at = rest.indexOf('@');
  const model = at === -1 ? rest : rest.slice(0, at);
  const baseURL = at === -1 ? undefined : rest.slice(at + 1);
  const candidate =
    provider === 'ollama'
      ? { provider: 'openai', model, baseURL: baseURL ?? OLLAMA_BASE_URL, ...extra }
      : provider === 'anthropic' || provider === 'openai'
        ? { provider, model, ...(baseURL ? { baseURL } : {}), ...extra }
        : undefined;
  if (!candidate)
    throw new PolishError(
      'INVALID_INPUT',
      `unknown provider "${provider}" in "${spec}" (providers: anthropic, openai, ollama, scripted)`,
    );
  const parsed = ModelSettingsSchema.safeParse(candidate);
  if (!parsed.success) {
    const issue = firstIssue(parsed.error, 'spec');
    throw new PolishError('INVALID_INPUT', `"${spec}": ${issue.path}: ${issue.message}`);
  }
  return parsed.data;
}

/** The spec a settings object was parsed from, for logs and results (never contains a key). */
export function formatModelSettings(settings: ModelSettings): string {
  if (settings.provider === 'scripted') return `scripted:${settings.script}`;
  if (settings.provider === 'none') return 'none';
  return `${settings.provider}:${settings.model}${settings.baseURL ? `@${displayUrl(settings.baseURL)}` : ''}`;
}

/**
 * The model whose lane a quorum's judge with these settings goes to (see `modelLane`):
 * `provider:model`, without the address it is reached at (where a worker reaches its model is
 * its own business), and for a script its file's name without extension. The run's
 * `--evaluators` spec and the worker's model flags give the same name for the same model.
 */
export function laneModelOf(settings: ModelSettings): string {
  if (settings.provider === 'scripted') return `scripted:${basename(settings.script, extname(settings.script))}`;
  if (settings.provider === 'none') return 'none';
  return `${settings.provider}:${settings.model}`;
}

/**
 * The model a worker with these settings reports (`provider:model`, as usage and prices are
 * keyed) and the most output tokens one of its calls may produce: what a budget declares.
 * Scripted answers have no token limit of their own; they are declared at the SDK default.
 */
export function declaredModelOf(settings: ModelSettings): { model: string; max_output_tokens: number } {
  switch (settings.provider) {
    case 'scripted':
      return {
        model: `scripted:scripted:${loadScriptFile(settings.script).name}`,
        max_output_tokens: DEFAULT_MAX_TOKENS,
      };
    case 'none':
      return { model: 'none:none', max_output_tokens: 1 };
    case 'anthropic':
      return { model: `anthropic:${settings.model}`, max_output_tokens: settings.maxTokens ?? DEFAULT_MAX_TOKENS };
    case 'openai':
      return {
        model: `${providerLabel(settings.baseURL)}:${settings.model}`,
        max_output_tokens: settings.maxTokens ?? DEFAULT_MAX_TOKENS,
      };
  }
}

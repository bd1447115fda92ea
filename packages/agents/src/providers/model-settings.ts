import { z } from 'zod';
import { PolishError, ReviseModeSchema } from '@polish/protocol';
import type { ModelProvider } from './model-provider.js';
import { createScriptedProvider } from './scripted-provider.js';
import { loadScriptFile } from './script-file.js';

/** How the model is asked to answer (see `AnswerStyle`): a worker setting, never run state. */
const answers = z.strictObject({ revise: ReviseModeSchema.optional(), evidence: z.boolean().optional() }).optional();

const callSettings = {
  /** Base URL of the API (an Anthropic-compatible gateway, or an OpenAI-compatible server). */
  baseURL: z.url().optional(),
  maxTokens: z.int().min(1).max(200_000).optional(),
  /** Per attempt, in milliseconds (the SDK applies it to each try). */
  timeoutMs: z.int().min(1).optional(),
  /** SDK retries for 408/409/429/5xx (529 included). */
  maxRetries: z.int().min(0).max(10).optional(),
};

/**
 * How a worker builds its model: what a host hands its workers. Never run state, never a key:
 * keys are read by the worker from its own environment.
 */
export const ModelSettingsSchema = z.discriminatedUnion('provider', [
  z.strictObject({ provider: z.literal('scripted'), script: z.string().min(1), answers }),
  /** For roles that call no model (par.command runs a shell command). */
  z.strictObject({ provider: z.literal('none') }),
  z.strictObject({ provider: z.literal('anthropic'), model: z.string().min(1), ...callSettings, answers }),
  z.strictObject({
    provider: z.literal('openai'),
    model: z.string().min(1),
    ...callSettings,
    answers,
    /** `json_schema` where the server supports it (default; falls back by itself), or `json_object`. */
    jsonMode: z.enum(['json_schema', 'json_object']).optional(),
  }),
]);
export type ModelSettings = z.infer<typeof ModelSettingsSchema>;

/** The environment variable a provider's key is read from, if it needs one. */
export function keyVariableFor(settings: ModelSettings): string | undefined {
  if (settings.provider === 'anthropic') return 'ANTHROPIC_API_KEY';
  // A local OpenAI-compatible server (Ollama, vLLM, llama.cpp) needs no key.
  if (settings.provider === 'openai' && settings.baseURL === undefined) return 'OPENAI_API_KEY';
  return undefined;
}

/**
 * The key sent to an OpenAI-compatible server at another address: its own variable, never
 * OPENAI_API_KEY (which would hand an OpenAI key to whatever server the base URL names).
 */
export const COMPATIBLE_KEY_VARIABLE = 'POLISH_OPENAI_COMPATIBLE_API_KEY';

/** What to tell someone who has no key: the variable, and the ways to run without one. */
export function missingKeyMessage(variable: string, models: string): string {
  return (
    `${variable} is not set, and ${models} needs it. Set ${variable} in the environment of the process that runs the ` +
    'workers, or run without a key: --model ollama:<model> (a local Ollama), --model openai:<model>@http://host:port/v1 ' +
    '(any OpenAI-compatible server), --model scripted:answers.yaml (the scripted model), or `polish demo`'
  );
}

/**
 * Builds the model a worker uses from its settings; the key comes from this process's
 * environment. Each SDK is loaded only by the workers that use it, to keep boots short.
 */
export async function createModel(
  settings: ModelSettings,
  environment: NodeJS.ProcessEnv = process.env,
): Promise<ModelProvider> {
  const provider = await createProvider(settings, environment);
  return 'answers' in settings && settings.answers ? { ...provider, answers: settings.answers } : provider;
}

async function createProvider(settings: ModelSettings, environment: NodeJS.ProcessEnv): Promise<ModelProvider> {
  const variable = keyVariableFor(settings);
  const key = variable ? environment[variable] : undefined;
  if (variable && !key)
    throw new PolishError(
      'INVALID_INPUT',
      missingKeyMessage(variable, `${settings.provider}:${'model' in settings ? settings.model : ''}`),
    );
  switch (settings.provider) {
    case 'scripted':
      return createScriptedProvider(loadScriptFile(settings.script));
    case 'none':
      return {
        info: { provider: 'none', model: 'none', scripted: false },
        generate: () => Promise.reject(new PolishError('INTERNAL', 'this worker has no model: its role calls none')),
      };
    case 'anthropic': {
      const { createAnthropicProvider } = await import('./anthropic-provider.js');
      return createAnthropicProvider({ ...settings, apiKey: key ?? '' });
    }
    case 'openai': {
      const { createOpenAICompatibleProvider } = await import('./openai-provider.js');
      // Local servers ignore the key, but the SDK wants one.
      return createOpenAICompatibleProvider({
        ...settings,
        apiKey: key ?? environment[COMPATIBLE_KEY_VARIABLE] ?? 'not-needed',
      });
    }
  }
}

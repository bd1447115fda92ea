import type { ModelProvider } from '@polish/agents';
import { createAnthropicProvider } from '@polish/agents/anthropic';
import { createOpenAICompatibleProvider } from '@polish/agents/openai';
import type { RecordedRequest } from './fake-model-server.js';
import { anthropicDialect } from './fake-anthropic.js';
import { openaiDialect } from './fake-openai.js';
import { anthropicSystem, anthropicUser, openaiSystem, openaiUser } from './sdk-requests.js';

// The two real SDKs the provider tests go through, each with its fake server's dialect and the
// way to read back what it sent, so a test runs once per SDK with `it.each(SDK_DIALECTS)`.

export interface SdkDialect {
  name: string;
  dialect: typeof anthropicDialect;
  system: (request: RecordedRequest) => string;
  user: (request: RecordedRequest) => string;
  /** polish's provider for this SDK, pointed at a fake server. */
  provider: (url: string, model: string, maxTokens?: number) => ModelProvider;
}

export const ANTHROPIC: SdkDialect = {
  name: 'Anthropic',
  dialect: anthropicDialect,
  system: anthropicSystem,
  user: anthropicUser,
  provider: (url, model, maxTokens = 1024) =>
    createAnthropicProvider({ model, apiKey: 'sk-ant-test', baseURL: url, maxTokens }),
};

export const OPENAI: SdkDialect = {
  name: 'OpenAI',
  dialect: openaiDialect,
  system: openaiSystem,
  user: openaiUser,
  provider: (url, model, maxTokens = 1024) =>
    createOpenAICompatibleProvider({ model, apiKey: 'sk-test', baseURL: url, maxTokens }),
};

export const SDK_DIALECTS = [ANTHROPIC, OPENAI] as const;

import OpenAI from 'openai';
import type { Usage } from '@polish/protocol';
import { textOf, type ModelProvider, type ModelRequest, type ModelResponse } from './model-provider.js';
import { modelError } from './provider-error.js';
import { DEFAULT_MAX_TOKENS, loadFetch, sdkOptions, type SdkProviderOptions } from './sdk-options.js';
import { displayUrl, providerLabel } from './display-url.js';

/** Settings of the OpenAI-compatible provider. */
export interface OpenAICompatibleProviderOptions extends SdkProviderOptions {
  jsonMode?: 'json_schema' | 'json_object';
}

function usageOf(usage: OpenAI.CompletionUsage | undefined): Usage {
  return {
    // prompt_tokens includes the cached ones: count each token once, at its own price.
    input_tokens: (usage?.prompt_tokens ?? 0) - (usage?.prompt_tokens_details?.cached_tokens ?? 0),
    output_tokens: usage?.completion_tokens ?? 0,
    cache_read_tokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    cache_write_tokens: 0,
    model_calls: 1,
  };
}

/** A 400 about the response format: the server does not do JSON Schema output. */
/**
 * The OpenAI SDK's errors are all named "Error" (and a minified build renames their classes):
 * the kinds that modelError words differently are told by class.
 */
function errorKind(error: unknown): string | undefined {
  if (error instanceof OpenAI.APIConnectionTimeoutError) return 'APIConnectionTimeoutError';
  if (error instanceof OpenAI.APIConnectionError) return 'APIConnectionError';
  return undefined;
}

function rejectsJsonSchema(error: unknown): boolean {
  const status = (error as { status?: number }).status;
  const message = String((error as { message?: string }).message ?? '');
  return status === 400 && /response_format|json_schema/i.test(message);
}

/**
 * Any OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM, llama.cpp server)
 * through the `openai` SDK with a base URL. Asks for `json_schema` output; a server that
 * rejects it (400 naming response_format) is asked again in JSON mode (`json_object`) and the
 * answer is validated by zod as always.
 */
export function createOpenAICompatibleProvider(options: OpenAICompatibleProviderOptions): ModelProvider {
  const { timeoutMs, maxRetries, client: clientOptions } = sdkOptions(options);
  const client = new OpenAI(clientOptions);
  // Learned once per provider instance: after a server rejects json_schema, ask in JSON mode.
  let jsonMode = options.jsonMode ?? 'json_schema';
  const provider = options.baseURL ? `openai-compatible server at ${displayUrl(options.baseURL)}` : 'openai';
  const keyVariable = options.baseURL ? undefined : 'OPENAI_API_KEY';

  const complete = (request: ModelRequest, jsonMode: 'json_schema' | 'json_object') =>
    client.chat.completions.create({
      model: options.model,
      // OpenAI's own newer models take only max_completion_tokens; other servers know max_tokens.
      ...(providerLabel(options.baseURL) === 'openai'
        ? { max_completion_tokens: options.maxTokens ?? DEFAULT_MAX_TOKENS }
        : { max_tokens: options.maxTokens ?? DEFAULT_MAX_TOKENS }),
      messages: [
        { role: 'system', content: request.system },
        ...request.messages.map((message) => ({ role: message.role, content: textOf(message.content) })),
      ],
      response_format:
        jsonMode === 'json_schema'
          ? {
              type: 'json_schema',
              json_schema: { name: `${request.role}_answer`, schema: request.jsonSchema, strict: false },
            }
          : { type: 'json_object' },
    });

  return {
    info: { provider: providerLabel(options.baseURL), model: options.model, scripted: false },
    warmUp: loadFetch,
    async generate(request: ModelRequest): Promise<ModelResponse> {
      const context = {
        role: request.role,
        provider,
        ...(keyVariable ? { keyVariable } : {}),
        timeoutMs,
        maxRetries,
        apiKey: options.apiKey,
      };
      let completion: OpenAI.ChatCompletion;
      try {
        completion = await complete(request, jsonMode);
      } catch (error) {
        if (jsonMode === 'json_object' || !rejectsJsonSchema(error))
          throw modelError(error, { ...context, name: errorKind(error) });
        jsonMode = 'json_object';
        try {
          completion = await complete(request, 'json_object');
        } catch (fallbackError) {
          throw modelError(fallbackError, { ...context, name: errorKind(fallbackError) });
        }
      }
      return { text: completion.choices[0]?.message?.content ?? '', usage: usageOf(completion.usage) };
    },
  };
}

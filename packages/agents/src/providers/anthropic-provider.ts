import Anthropic from '@anthropic-ai/sdk';
import type { Usage } from '@polish/protocol';
import type { ModelMessage, ModelProvider, ModelRequest, ModelResponse } from './model-provider.js';
import { modelError } from './provider-error.js';
import { DEFAULT_MAX_TOKENS, loadFetch, sdkOptions, type SdkProviderOptions } from './sdk-options.js';

/** Settings of the Anthropic provider. */
export type AnthropicProviderOptions = SdkProviderOptions;

/** The tool the model is made to call: its input is the answer. */
const ANSWER_TOOL = 'answer';
const CACHE = { type: 'ephemeral' } as const;

function toAnthropicMessages(messages: ModelMessage[]): Anthropic.MessageParam[] {
  return messages.map((message) => ({
    role: message.role,
    content:
      typeof message.content === 'string'
        ? message.content
        : message.content.map((part) => ({
            type: 'text' as const,
            text: part.text,
            ...(part.cache ? { cache_control: CACHE } : {}),
          })),
  }));
}

function usageOf(usage: Anthropic.Usage): Usage {
  return {
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
    cache_read_tokens: usage.cache_read_input_tokens ?? 0,
    cache_write_tokens: usage.cache_creation_input_tokens ?? 0,
    model_calls: 1,
  };
}

/**
 * Claude through the official SDK. Structured output is a forced tool call: the answer's JSON
 * Schema is the tool's `input_schema` and `tool_choice` names it. (Chosen over
 * `output_config.format` because every tool-capable Claude model and Anthropic-compatible
 * gateway accepts it, and tool input schemas take our JSON Schema as it is; the answer is
 * re-validated by zod and repaired either way.) The system prompt, and any content part marked
 * `cache` (the locked criteria), end a `cache_control` breakpoint (Anthropic caches a prefix
 * only past a minimum length, about 1024 tokens on most models). The SDK retries
 * 408/409/429/5xx/529 with backoff; the timeout applies to each attempt.
 */
export function createAnthropicProvider(options: AnthropicProviderOptions): ModelProvider {
  const { timeoutMs, maxRetries, client: clientOptions } = sdkOptions(options);
  const client = new Anthropic(clientOptions);
  return {
    info: { provider: 'anthropic', model: options.model, scripted: false },
    warmUp: loadFetch,
    async generate(request: ModelRequest): Promise<ModelResponse> {
      let message: Anthropic.Message;
      try {
        message = await client.messages.create({
          model: options.model,
          max_tokens: options.maxTokens ?? DEFAULT_MAX_TOKENS,
          system: [{ type: 'text', text: request.system, cache_control: CACHE }],
          tools: [
            {
              name: ANSWER_TOOL,
              description: `Return your ${request.role} answer.`,
              input_schema: request.jsonSchema as Anthropic.Tool.InputSchema,
            },
          ],
          tool_choice: { type: 'tool', name: ANSWER_TOOL },
          messages: toAnthropicMessages(request.messages),
        });
      } catch (error) {
        throw modelError(error, {
          role: request.role,
          provider: 'anthropic',
          keyVariable: 'ANTHROPIC_API_KEY',
          timeoutMs,
          maxRetries,
          apiKey: options.apiKey,
        });
      }
      const call = message.content.find((block) => block.type === 'tool_use' && block.name === ANSWER_TOOL);
      // No tool call (e.g. cut off at max_tokens): pass the text on, and validation asks again.
      const text =
        call?.type === 'tool_use'
          ? JSON.stringify(call.input)
          : message.content.map((block) => (block.type === 'text' ? block.text : '')).join('') ||
            `(no answer: stop_reason ${message.stop_reason})`;
      return { text, usage: usageOf(message.usage) };
    },
  };
}

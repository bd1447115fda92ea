import type { ApiDialect } from './fake-model-server.js';

type Message = { role: string; content: string };

/** OpenAI-compatible chat completions, as Ollama, vLLM and llama.cpp serve them. */
export const openaiDialect: ApiDialect = {
  split(body) {
    return {
      prefix: '',
      rest: ((body.messages as Message[] | undefined) ?? []).map((message) => message.content).join(' '),
    };
  },
  success(body, content, usage) {
    const text = content.json !== undefined ? JSON.stringify(content.json) : (content.text ?? '');
    return {
      id: 'chatcmpl-fake',
      object: 'chat.completion',
      created: 0,
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
      usage: {
        prompt_tokens: usage.input_tokens,
        completion_tokens: usage.output_tokens,
        total_tokens: usage.input_tokens + usage.output_tokens,
      },
    };
  },
  error(_status, errorType, message) {
    return { error: { message, type: errorType, code: null } };
  },
};

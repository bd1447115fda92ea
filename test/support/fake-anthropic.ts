import type { ApiDialect } from './fake-model-server.js';

type Block = { type: string; text?: string; cache_control?: unknown };
type Message = { role: string; content: string | Block[] };

/** The Anthropic Messages API, as far as polish uses it: forced tool answers, cache markers, usage. */
export const anthropicDialect: ApiDialect = {
  split(body) {
    // Everything up to the last block with cache_control is the cacheable prefix (tools, system, messages).
    const blocks: Block[] = [
      { type: 'text', text: JSON.stringify(body.tools ?? []) },
      ...((body.system as Block[] | undefined) ?? []),
      ...((body.messages as Message[] | undefined) ?? []).flatMap((message) =>
        typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content,
      ),
    ];
    const last = blocks.map((block) => Boolean(block.cache_control)).lastIndexOf(true);
    const text = (list: Block[]) => list.map((block) => block.text ?? '').join(' ');
    return { prefix: last === -1 ? '' : text(blocks.slice(0, last + 1)), rest: text(blocks.slice(last + 1)) };
  },
  success(body, content, usage) {
    return {
      id: 'msg_fake',
      type: 'message',
      role: 'assistant',
      model: body.model,
      content:
        content.json !== undefined
          ? [{ type: 'tool_use', id: 'toolu_fake', name: 'answer', input: content.json }]
          : [{ type: 'text', text: content.text }],
      stop_reason: content.json !== undefined ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_input_tokens: usage.cache_read_tokens,
        cache_creation_input_tokens: usage.cache_write_tokens,
      },
    };
  },
  error(_status, errorType, message) {
    return { type: 'error', error: { type: errorType, message } };
  },
};

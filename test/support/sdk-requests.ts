import type { RecordedRequest } from './fake-model-server.js';

// What a fake provider server received, read the way each SDK sent it: the system prompt and
// the user side of the conversation as text.

type Block = { type: string; text: string };
type OpenAIMessage = { role: string; content: string };

/** The system prompt of an Anthropic Messages request. */
export const anthropicSystem = (request: RecordedRequest) => ((request.body.system as Block[])[0] as Block).text;

/** Every message of an Anthropic request as text, one per line (the re-asks included). */
export const anthropicUser = (request: RecordedRequest) =>
  (request.body.messages as { content: string | Block[] }[])
    .map((message) =>
      typeof message.content === 'string' ? message.content : message.content.map((block) => block.text).join(''),
    )
    .join('\n');

/** The messages of an OpenAI chat completions request. */
export const openaiMessages = (request: RecordedRequest) => request.body.messages as OpenAIMessage[];

/** The system prompt of an OpenAI chat completions request. */
export const openaiSystem = (request: RecordedRequest) => openaiMessages(request)[0]?.content ?? '';

/** Every message after the system prompt of an OpenAI request, as text. */
export const openaiUser = (request: RecordedRequest) =>
  openaiMessages(request)
    .slice(1)
    .map((message) => message.content)
    .join('\n');

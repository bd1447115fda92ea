import type { ModelInfo, TaskRole, Usage } from '@polish/protocol';

/**
 * A piece of a user turn. `cache: true` marks the end of a stable prefix (e.g. the locked
 * criteria) that providers with prompt caching may cache.
 */
export interface ContentPart {
  text: string;
  cache?: boolean;
}

/** One turn of the conversation with a model. */
export interface ModelMessage {
  role: 'user' | 'assistant';
  content: string | ContentPart[];
}

/** The plain text of a turn's content. */
export function textOf(content: ModelMessage['content']): string {
  return typeof content === 'string' ? content : content.map((part) => part.text).join('');
}

/** What a handler asks of a model: a system prompt, the conversation, and the answer's JSON Schema. */
export interface ModelRequest {
  role: TaskRole;
  system: string;
  messages: ModelMessage[];
  /** JSON Schema of the expected answer, for providers with structured output. */
  jsonSchema: Record<string, unknown>;
  /** The validated task payload, for the scripted provider's matching rules only; real providers ignore it. */
  payload: Readonly<Record<string, unknown>>;
}

/** The model's raw answer text and what it cost. */
export interface ModelResponse {
  text: string;
  usage: Usage;
}

/** The one interface every model provider implements. */
export interface ModelProvider {
  readonly info: ModelInfo;
  generate(request: ModelRequest): Promise<ModelResponse>;
}

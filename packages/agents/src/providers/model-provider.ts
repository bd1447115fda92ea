import type { ModelInfo, ReviseMode, TaskRole, Usage } from '@polish/protocol';

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

/**
 * How a model is asked to answer where polish offers a choice: revisions by edits or as the
 * whole text (default `auto`), and passes with a quote of the artifact as evidence (default on).
 * A worker setting, like the model itself: never run state, never in a payload.
 */
export interface AnswerStyle {
  revise?: ReviseMode;
  evidence?: boolean;
}

/** The one interface every model provider implements. */
export interface ModelProvider {
  readonly info: ModelInfo;
  /** How this model is asked to answer (see {@link AnswerStyle}); defaults when absent. */
  readonly answers?: AnswerStyle;
  generate(request: ModelRequest): Promise<ModelResponse>;
  /**
   * Loads now what the first call would otherwise load inside it, without calling the model; a
   * worker calls it before it says it is ready, so a fresh process's first task does not pay it.
   */
  warmUp?(): void;
}

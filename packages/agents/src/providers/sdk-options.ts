/** Most output tokens a call may produce when the settings name no max_tokens. */
export const DEFAULT_MAX_TOKENS = 8192;

/** Settings every SDK-backed provider takes. */
export interface SdkProviderOptions {
  model: string;
  apiKey: string;
  baseURL?: string;
  maxTokens?: number;
  /** Per attempt, in milliseconds. */
  timeoutMs?: number;
  maxRetries?: number;
}

/** Defaults shared by the SDK-backed providers: 60 s per attempt, 2 retries (the SDKs back off between them). */
export function sdkOptions(options: SdkProviderOptions) {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const maxRetries = options.maxRetries ?? 2;
  return {
    timeoutMs,
    maxRetries,
    client: {
      apiKey: options.apiKey,
      ...(options.baseURL ? { baseURL: options.baseURL } : {}),
      timeout: timeoutMs,
      maxRetries,
    },
  };
}

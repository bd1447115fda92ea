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

/**
 * The SDKs call the model with Node's fetch, which Node loads at its first use: in a fresh
 * process that took 50 ms of compiling inside the first call (its first fetch 75 → 22 ms when
 * loaded before; docs/benchmarks.md). Making its objects loads it, with no request sent.
 */
export function loadFetch(): void {
  new Request('http://localhost/', {
    method: 'POST',
    headers: new Headers({ 'content-type': 'application/json' }),
    body: '{}',
  });
  new Response('{}');
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

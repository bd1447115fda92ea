import { PolishError, type TaskRole } from '@polish/protocol';

/** What both SDKs' errors look like, read without importing either SDK here. */
interface SdkError {
  name?: string;
  status?: number;
  message?: string;
  error?: { error?: { type?: string; message?: string }; message?: string };
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

/** Longest server text a reason quotes. */
const MAX_DETAIL = 300;
/** A run of this many characters of the key in the server's text counts as quoting the key. */
const KEY_FRAGMENT = 8;

/**
 * The server's own words, fit to travel in a reply (which is stored and shown): servers and
 * gateways echo what they were sent, the key among it, whole or in part (`sk-ant-…abcd`). Any
 * run of the key's characters drops the words, and long ones are cut.
 */
function serverWords(detail: string, apiKey: string | undefined): string {
  if (apiKey && apiKey.length >= KEY_FRAGMENT) {
    for (let at = 0; at + KEY_FRAGMENT <= apiKey.length; at += 1)
      if (detail.includes(apiKey.slice(at, at + KEY_FRAGMENT)))
        return "(the server's words are left out: they quote the API key)";
  }
  return detail.length > MAX_DETAIL ? `${detail.slice(0, MAX_DETAIL)}…` : detail;
}

/**
 * Turns an SDK error into a `MODEL_ERROR` that says which role, which provider, and why, in
 * words a user can act on. The SDK has already retried what was retryable, so this is final.
 */
export function modelError(
  error: unknown,
  context: {
    role: TaskRole;
    provider: string;
    keyVariable?: string;
    timeoutMs: number;
    maxRetries: number;
    /** The error's kind where it does not carry it as its name (the OpenAI SDK's errors). */
    name?: string;
    /** The key the request was sent with: never quoted back. */
    apiKey?: string;
  },
): PolishError {
  const sdkError = error as SdkError;
  const name = context.name ?? sdkError?.name ?? '';
  const detail = serverWords(
    sdkError?.error?.error?.message ?? sdkError?.error?.message ?? sdkError?.message ?? String(error),
    context.apiKey,
  );
  const type = sdkError?.error?.error?.type;
  const attempts = `${context.maxRetries + 1} attempt${context.maxRetries === 0 ? '' : 's'}`;
  const prefix = `${context.role}: ${context.provider}`;
  let reason: string;
  if (name === 'APIConnectionTimeoutError') {
    reason = `${prefix} did not answer within ${seconds(context.timeoutMs)} (timeout, ${attempts})`;
  } else if (name === 'APIConnectionError') {
    reason = `${prefix} could not be reached (${attempts}): ${detail}`;
  } else if (sdkError?.status === 401) {
    // The server's own words are left out: some echo part of the key back.
    reason = `${prefix} rejected the API key${context.keyVariable ? ` in ${context.keyVariable}` : ''} (401${type ? ` ${type}` : ''})`;
  } else if (sdkError?.status === 403) {
    reason = `${prefix} refused access (403${type ? ` ${type}` : ''})`;
  } else if (sdkError?.status === 404) {
    reason = `${prefix} does not know this model or endpoint (404): ${detail}`;
  } else if (
    sdkError?.status !== undefined &&
    (sdkError.status >= 500 || sdkError.status === 429 || sdkError.status === 408 || sdkError.status === 409)
  ) {
    reason = `${prefix} answered ${sdkError.status}${type ? ` ${type}` : ''} after ${attempts}: ${detail}`;
  } else if (sdkError?.status !== undefined) {
    reason = `${prefix} rejected the request (${sdkError.status}${type ? ` ${type}` : ''}): ${detail}`;
  } else {
    reason = `${prefix} failed: ${detail}`;
  }
  return new PolishError('MODEL_ERROR', reason, { cause: error, retryable: false });
}

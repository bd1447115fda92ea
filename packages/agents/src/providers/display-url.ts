/** A URL as it may be shown in logs, results and errors: no user, password or query. */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname.replace(/\/$/, '')}`;
  } catch {
    return '(invalid URL)';
  }
}

/**
 * Who an OpenAI-compatible endpoint is, for usage and prices: `openai` (OpenAI itself), `local`
 * (a server on this machine: no per-token bill), or `openai-compatible` (anything else: no
 * default price, so no made-up cost).
 */
export function providerLabel(baseURL: string | undefined): 'openai' | 'local' | 'openai-compatible' {
  if (!baseURL) return 'openai';
  try {
    const host = new URL(baseURL).hostname;
    if (host === 'api.openai.com') return 'openai';
    return host === 'localhost' || host === '[::1]' || host.startsWith('127.') ? 'local' : 'openai-compatible';
  } catch {
    return 'openai-compatible';
  }
}

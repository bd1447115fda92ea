import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the fake server received. */
export interface RecordedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
  /** The usage the server reported for this request's answer (none for an error or a hang). */
  usage?: Usage;
}

/** What the test wants the server to do with a request. */
export type FakeReply =
  | { answer: unknown } // a successful answer carrying this JSON
  | { text: string } // a successful answer carrying this raw text (for malformed output)
  | { status: number; errorType: string; message: string } // an API error
  | { hang: true }; // never answer

/** A local HTTP server that speaks one provider's API; every request is recorded. */
export interface FakeModelServer {
  url: string;
  requests: RecordedRequest[];
  /** Usage the server reported, summed over every successful answer. */
  reported: {
    input_tokens: number;
    output_tokens: number;
    cache_read_tokens: number;
    cache_write_tokens: number;
    model_calls: number;
  };
  stop(): Promise<void>;
}

/** How a provider's API wraps answers, errors and usage. */
export interface ApiDialect {
  /** The request's text as two parts: the cacheable prefix (up to the last cache marker) and the rest. */
  split(body: Record<string, unknown>): { prefix: string; rest: string };
  success(body: Record<string, unknown>, content: { json?: unknown; text?: string }, usage: Usage): unknown;
  error(status: number, errorType: string, message: string): unknown;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
}

/** The fake's tokenizer: words. Deterministic, and enough to compare requests. */
export const countTokens = (text: string) => text.split(/\s+/).filter(Boolean).length;

/** The rule of thumb the providers publish (about 4 characters a token), for cost figures. */
export const charactersOverFour = (text: string) => Math.ceil(text.length / 4);

/** Starts a fake provider API on 127.0.0.1; `reply` decides each answer (its index counts from 0). */
export async function startFakeModelServer(
  dialect: ApiDialect,
  reply: (request: RecordedRequest, index: number) => FakeReply,
  tokenizer: (text: string) => number = countTokens,
): Promise<FakeModelServer> {
  const requests: RecordedRequest[] = [];
  const reported = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, model_calls: 0 };
  const cachedPrefixes = new Set<string>();
  const server: Server = createServer((incoming, response) => {
    let raw = '';
    incoming.setEncoding('utf8');
    incoming.on('data', (chunk: string) => (raw += chunk));
    incoming.on('end', () => {
      const recorded: RecordedRequest = {
        path: incoming.url ?? '',
        headers: incoming.headers,
        body: JSON.parse(raw || '{}'),
      };
      requests.push(recorded);
      const decision = reply(recorded, requests.length - 1);
      if ('hang' in decision) return;
      const send = (status: number, payload: unknown) => {
        // retry-after-ms keeps the SDKs' retries fast in tests.
        response.writeHead(status, { 'content-type': 'application/json', 'retry-after-ms': '5' });
        response.end(JSON.stringify(payload));
      };
      if ('status' in decision)
        return send(decision.status, dialect.error(decision.status, decision.errorType, decision.message));
      const { prefix, rest } = dialect.split(recorded.body);
      const prefixTokens = tokenizer(prefix);
      const cacheHit = prefix !== '' && cachedPrefixes.has(prefix);
      if (prefix !== '') cachedPrefixes.add(prefix);
      const text = 'answer' in decision ? JSON.stringify(decision.answer) : decision.text;
      const usage = {
        input_tokens: tokenizer(rest),
        output_tokens: tokenizer(text),
        cache_read_tokens: cacheHit ? prefixTokens : 0,
        cache_write_tokens: cacheHit ? 0 : prefixTokens,
      };
      recorded.usage = usage;
      reported.input_tokens += usage.input_tokens;
      reported.output_tokens += usage.output_tokens;
      reported.cache_read_tokens += usage.cache_read_tokens;
      reported.cache_write_tokens += usage.cache_write_tokens;
      reported.model_calls += 1;
      send(
        200,
        dialect.success(
          recorded.body,
          'answer' in decision ? { json: decision.answer } : { text: decision.text },
          usage,
        ),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    reported,
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

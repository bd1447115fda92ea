import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { createAnthropicProvider } from '@polish/agents/anthropic';
import { createOpenAICompatibleProvider } from '@polish/agents/openai';
import type { RunResult } from '@polish/protocol';
import {
  startFakeModelServer,
  countTokens,
  type FakeModelServer,
  type FakeReply,
  type RecordedRequest,
} from './support/fake-model-server.js';
import { anthropicDialect } from './support/fake-anthropic.js';
import { openaiDialect } from './support/fake-openai.js';
import { fakeAnswer, roleOf } from './support/fake-llm.js';
import { CRITERIA, runWithModels } from './support/scenario.js';
import { anthropicSystem, anthropicUser, openaiMessages, openaiSystem, openaiUser } from './support/sdk-requests.js';

type Block = { type: string; text: string; cache_control?: unknown };
const KEY = 'sk-ant-test-key-not-real';
const spec = { artifact: '# Limits\nversion 1 of the rate limit page.\n', goal: 'Document the rate limiter.' };

/** The fake "model": answers each role from the prompt, unless the test overrides a request. */
function answering(system: (request: RecordedRequest) => string, user: (request: RecordedRequest) => string) {
  return (override?: (request: RecordedRequest, index: number) => FakeReply | undefined) =>
    (request: RecordedRequest, index: number): FakeReply =>
      override?.(request, index) ?? { answer: fakeAnswer(roleOf(system(request)), user(request)) };
}
const anthropicModel = answering(anthropicSystem, anthropicUser);
const openaiModel = answering(openaiSystem, openaiUser);

let servers: FakeModelServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  servers = [];
});

async function fakeAnthropic(override?: (request: RecordedRequest, index: number) => FakeReply | undefined) {
  const server = await startFakeModelServer(anthropicDialect, anthropicModel(override));
  servers.push(server);
  return server;
}

const claude = (server: FakeModelServer, options: { timeoutMs?: number; maxRetries?: number } = {}) =>
  createAnthropicProvider({ model: 'claude-test', apiKey: KEY, baseURL: server.url, maxTokens: 1024, ...options });

const failure = (result: RunResult) =>
  result.status === 'FAILED' ? `${result.code}: ${result.reason}` : result.status;

describe('Anthropic provider (real SDK, local fake server)', () => {
  it('sends each role the model, max_tokens, system, answer schema and cache markers, and nothing from history', async () => {
    const server = await fakeAnthropic();
    const { result } = await runWithModels(spec, claude(server));
    expect(result.status).toBe('CONVERGED');
    expect(result.iterations).toBe(3);
    const byRole = (role: string) => server.requests.filter((request) => roleOf(anthropicSystem(request)) === role);
    for (const request of server.requests) {
      expect(request.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(request.body).toMatchObject({
        model: 'claude-test',
        max_tokens: 1024,
        tool_choice: { type: 'tool', name: 'answer' },
      });
      expect((request.body.system as Block[])[0]?.cache_control).toEqual({ type: 'ephemeral' });
      expect((request.body.tools as { name: string }[]).map((tool) => tool.name)).toEqual(['answer']);
    }
    const [firstEvaluation, secondEvaluation] = byRole('evaluate');
    const evaluationBlocks = (firstEvaluation?.body.messages as { content: Block[] }[])[0]?.content ?? [];
    expect(evaluationBlocks[0]?.text).toContain(`C1: ${CRITERIA[0]?.text}`);
    expect(evaluationBlocks[0]?.cache_control).toEqual({ type: 'ephemeral' });
    expect(evaluationBlocks[1]?.text).toContain('version 1 of the rate limit page');
    const evaluationSchema = (
      firstEvaluation?.body.tools as {
        input_schema: { properties: { scores: { items: { properties: { criterion_id: { enum: string[] } } } } } };
      }[]
    )[0];
    expect(evaluationSchema?.input_schema.properties.scores.items.properties.criterion_id.enum).toEqual([
      'C1',
      'C2',
      'C3',
    ]);
    const second = anthropicUser(secondEvaluation as RecordedRequest);
    expect(second).toContain('version 2 of the rate limit page');
    expect(second).not.toContain('version 1');
    expect(second).not.toContain('fix C');
    const revision = anthropicUser(byRole('revise')[0] as RecordedRequest);
    expect(revision).toContain('C2: fix C2');
    expect(revision).toContain(spec.goal);
    for (const criterion of CRITERIA) expect(revision).not.toContain(criterion.text);
    expect(revision).not.toContain('"pass"');
  });

  it.each([
    [429, 'rate_limit_error'],
    [529, 'overloaded_error'],
  ])('succeeds after a retry when the API answers %i first', async (status, errorType) => {
    const server = await fakeAnthropic((_request, index) =>
      index === 0 ? { status, errorType, message: 'try again' } : undefined,
    );
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA, artifact: 'version 3' }, claude(server));
    expect(result.status).toBe('CONVERGED');
    expect(server.requests).toHaveLength(2);
  });

  it('fails the run naming the role when every try answers 500', async () => {
    const server = await fakeAnthropic(() => ({ status: 500, errorType: 'api_error', message: 'internal trouble' }));
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA }, claude(server, { maxRetries: 2 }));
    expect(failure(result)).toBe(
      'MODEL_ERROR: evaluate: anthropic answered 500 api_error after 3 attempts: internal trouble',
    );
    expect(server.requests).toHaveLength(3);
  });

  it('fails the run when the server hangs: the timeout fires', async () => {
    const server = await fakeAnthropic(() => ({ hang: true }));
    const { result } = await runWithModels(
      { ...spec, criteria: CRITERIA },
      claude(server, { timeoutMs: 300, maxRetries: 0 }),
    );
    expect(failure(result)).toBe('MODEL_ERROR: evaluate: anthropic did not answer within 0.3 s (timeout, 1 attempt)');
  });

  it('fails the run naming the role and the key variable on an authentication error', async () => {
    // This server echoes the key in its error text, as some do: it must not reach the reason.
    const server = await fakeAnthropic(() => ({
      status: 401,
      errorType: 'authentication_error',
      message: `invalid x-api-key ${KEY}`,
    }));
    const { result } = await runWithModels(spec, claude(server));
    expect(failure(result)).toBe(
      'MODEL_ERROR: criteria: anthropic rejected the API key in ANTHROPIC_API_KEY (401 authentication_error)',
    );
    expect(JSON.stringify(result)).not.toContain(KEY);
  });

  it.each([
    [400, 'rejected the request (400 invalid_request_error)'],
    [404, 'does not know this model or endpoint (404)'],
    [429, 'answered 429 invalid_request_error after 1 attempt'],
    [500, 'answered 500 invalid_request_error after 1 attempt'],
  ])('never quotes the key back when a %i echoes it, whole or in part', async (status, said) => {
    // Servers and gateways echo what they were sent: the key whole, and its ends as some print it.
    for (const echo of [`Bearer ${KEY}`, `key ${KEY.slice(0, 10)}…${KEY.slice(-4)}`, `…${KEY.slice(-8)}`]) {
      const server = await fakeAnthropic(() => ({
        status,
        errorType: 'invalid_request_error',
        message: `invalid credentials ${echo}`,
      }));
      const { result } = await runWithModels(spec, claude(server, { maxRetries: 0 }));
      expect(failure(result)).toBe(
        `MODEL_ERROR: criteria: anthropic ${said}: (the server's words are left out: they quote the API key)`,
      );
      expect(JSON.stringify(result)).not.toContain(KEY.slice(-8));
    }
    // Words without the key are kept, cut at 300 characters.
    const server = await fakeAnthropic(() => ({
      status,
      errorType: 'invalid_request_error',
      message: `bad field ${'x'.repeat(400)}`,
    }));
    const { result } = await runWithModels(spec, claude(server, { maxRetries: 0 }));
    expect(failure(result)).toBe(`MODEL_ERROR: criteria: anthropic ${said}: bad field ${'x'.repeat(290)}…`);
  });

  it('repairs a schema-violating answer once, citing the error in the next request', async () => {
    const server = await fakeAnthropic((_request, index) =>
      index === 0 ? { answer: { scores: [{ criterion_id: 'C1', pass: true }] } } : undefined,
    );
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA, artifact: 'version 3' }, claude(server));
    expect(result.status).toBe('CONVERGED');
    expect(server.requests).toHaveLength(2);
    const retry = server.requests[1]?.body.messages as { role: string; content: string }[];
    expect(retry.map((message) => message.role)).toEqual(['user', 'assistant', 'user']);
    expect(retry[2]?.content).toContain('criterion C2 is not scored');
  });

  it('ends FAILED with a contract reason when every answer is malformed', async () => {
    const server = await fakeAnthropic(() => ({ text: 'I would rather chat.' }));
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA }, claude(server));
    expect(failure(result)).toMatch(
      /^CONTRACT_VIOLATION: evaluate answer still invalid after 2 repairs: the answer is not JSON/,
    );
    expect(server.requests).toHaveLength(3);
    // Failed work was paid for: it is counted.
    expect(result.usage).toEqual(server.reported);
    expect(result.usage_by_wave.evaluate).toEqual(server.reported);
  });

  it('reports exactly the usage the server reported, per run, per wave and per iteration', async () => {
    const server = await fakeAnthropic();
    const { result, events } = await runWithModels(spec, claude(server));
    const { model_calls: calls, ...tokens } = server.reported;
    expect(result.usage).toEqual({ ...tokens, model_calls: calls });
    expect(tokens.cache_read_tokens).toBeGreaterThan(0);
    expect(tokens.cache_write_tokens).toBeGreaterThan(0);
    const waves = Object.values(result.usage_by_wave);
    expect(waves.reduce((sum, usage) => sum + usage.input_tokens, 0)).toBe(tokens.input_tokens);
    const iterations = result.history.reduce((sum, record) => sum + record.usage.output_tokens, 0);
    expect(iterations + result.usage_by_wave.criteria.output_tokens).toBe(tokens.output_tokens);
    expect(result.usage_by_model).toEqual({ 'anthropic:claude-test': result.usage });
    const finished = events.find((event) => event.type === 'run.finished');
    expect(finished?.type === 'run.finished' && finished.usage).toEqual(result.usage);
    const perIteration = events.flatMap((event) => (event.type === 'iteration.finished' ? [event.usage] : []));
    expect(perIteration).toEqual(result.history.map((record) => record.usage));
  });

  it("does not grow the evaluator's input with the iteration number: no history leaks into Wave 2", async () => {
    const server = await fakeAnthropic((request) =>
      roleOf(anthropicSystem(request)) === 'evaluate'
        ? { answer: { scores: CRITERIA.map((c) => ({ criterion_id: c.id, pass: false, gap: 'still missing' })) } }
        : undefined,
    );
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA, cap: 5 }, claude(server));
    expect(result.status).toBe('CAP_REACHED');
    const evaluations = server.requests.filter((request) => roleOf(anthropicSystem(request)) === 'evaluate');
    expect(evaluations).toHaveLength(5);
    const sizes = evaluations.map((request) => countTokens(JSON.stringify(request.body)));
    expect(new Set(sizes).size).toBe(1);
  });

  it('computes a cost estimate from the price table', async () => {
    const server = await fakeAnthropic();
    const prices = { 'anthropic:claude-test': { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 } };
    const { result } = await runWithModels(spec, claude(server), { prices });
    const usage = result.usage;
    const expected =
      (usage.input_tokens * 3 +
        usage.output_tokens * 15 +
        usage.cache_read_tokens * 0.3 +
        usage.cache_write_tokens * 3.75) /
      1e6;
    expect(result.cost?.total).toBeCloseTo(expected, 12);
    const unpriced = await runWithModels(spec, claude(server), { prices: {} });
    expect(unpriced.result.cost).toEqual({ currency: 'USD', total: null, by_model: { 'anthropic:claude-test': null } });
  });
});

describe('OpenAI-compatible provider (real SDK, local fake server)', () => {
  async function fakeOpenAI(override?: (request: RecordedRequest, index: number) => FakeReply | undefined) {
    const server = await startFakeModelServer(openaiDialect, openaiModel(override));
    servers.push(server);
    return server;
  }
  const local = (server: FakeModelServer) =>
    createOpenAICompatibleProvider({
      model: 'llama-test',
      apiKey: 'not-needed',
      baseURL: `${server.url}/v1`,
      maxTokens: 512,
    });

  it('fails the run when the server hangs, saying it timed out (the SDK names none of its errors)', async () => {
    const server = await fakeOpenAI(() => ({ hang: true }));
    const hanging = createOpenAICompatibleProvider({
      model: 'llama-test',
      apiKey: 'not-needed',
      baseURL: `${server.url}/v1`,
      timeoutMs: 300,
      maxRetries: 0,
    });
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA }, hanging);
    expect(failure(result)).toMatch(/^MODEL_ERROR: evaluate: .+ did not answer within 0\.3 s \(timeout, 1 attempt\)$/);
  });

  it('asks for json_schema output with the answer schema, and runs the loop', async () => {
    const server = await fakeOpenAI();
    const { result } = await runWithModels(spec, local(server));
    expect(result.status).toBe('CONVERGED');
    const evaluation = server.requests.find(
      (request) => roleOf(openaiMessages(request)[0]?.content ?? '') === 'evaluate',
    );
    expect(evaluation?.path).toBe('/v1/chat/completions');
    expect(evaluation?.body).toMatchObject({
      model: 'llama-test',
      max_tokens: 512,
      response_format: { type: 'json_schema' },
    });
    const format = evaluation?.body.response_format as { json_schema: { schema: { properties: { scores: unknown } } } };
    expect(format.json_schema.schema.properties.scores).toBeDefined();
    expect(openaiMessages(evaluation as RecordedRequest).map((message) => message.role)).toEqual(['system', 'user']);
    expect(result.models).toEqual([{ provider: 'local', model: 'llama-test', scripted: false }]);
    expect(result.usage.input_tokens).toBe(server.reported.input_tokens);
  });

  it('retries a 429 and fails naming the role when every try answers 503', async () => {
    const retried = await fakeOpenAI((_request, index) =>
      index === 0 ? { status: 429, errorType: 'rate_limit', message: 'slow down' } : undefined,
    );
    expect(
      (await runWithModels({ ...spec, criteria: CRITERIA, artifact: 'version 3' }, local(retried))).result.status,
    ).toBe('CONVERGED');
    expect(retried.requests).toHaveLength(2);
    const down = await fakeOpenAI(() => ({ status: 503, errorType: 'unavailable', message: 'model is loading' }));
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA }, local(down));
    expect(failure(result)).toBe(
      `MODEL_ERROR: evaluate: openai-compatible server at ${down.url}/v1 answered 503 after 3 attempts: model is loading`,
    );
  });

  it('never quotes its key back when the server echoes it in an error', async () => {
    const key = 'sk-local-gateway-key-1234';
    const server = await fakeOpenAI(() => ({
      status: 502,
      errorType: 'bad_gateway',
      message: `upstream refused ${key}`,
    }));
    const provider = createOpenAICompatibleProvider({
      model: 'llama-test',
      apiKey: key,
      baseURL: `${server.url}/v1`,
      maxRetries: 0,
    });
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA }, provider);
    expect(failure(result)).toBe(
      `MODEL_ERROR: evaluate: openai-compatible server at ${server.url}/v1 answered 502 after 1 attempt: (the server's words are left out: they quote the API key)`,
    );
    expect(JSON.stringify(result)).not.toContain(key.slice(-8));
  });

  it('falls back to JSON mode when the server rejects json_schema', async () => {
    const server = await fakeOpenAI((request) =>
      (request.body.response_format as { type: string }).type === 'json_schema'
        ? {
            status: 400,
            errorType: 'invalid_request_error',
            message: "response_format 'json_schema' is not supported by this server",
          }
        : undefined,
    );
    const { result } = await runWithModels({ ...spec, criteria: CRITERIA, artifact: 'version 3' }, local(server));
    expect(result.status).toBe('CONVERGED');
    expect(server.requests.map((request) => (request.body.response_format as { type: string }).type)).toEqual([
      'json_schema',
      'json_object',
    ]);
  });
});

describe('SDK providers at boot', () => {
  it("load Node's fetch in warmUp, before any call, without calling the model", async () => {
    const server = await fakeAnthropic();
    const dist = new URL('../packages/agents/dist/providers/', import.meta.url).href;
    // A fresh process: this one has loaded fetch long ago.
    const code = [
      `const { createAnthropicProvider } = await import('${dist}anthropic-provider.js');`,
      `const { createOpenAICompatibleProvider } = await import('${dist}openai-provider.js');`,
      "const fetchLoaded = () => process.moduleLoadList.some((name) => name.includes('undici'));",
      'const seen = [];',
      `for (const make of [createAnthropicProvider, createOpenAICompatibleProvider]) {`,
      `  const provider = make({ model: 'warm-test', apiKey: 'sk-warm', baseURL: '${server.url}' });`,
      '  seen.push(fetchLoaded());',
      '  provider.warmUp();',
      '  seen.push(fetchLoaded());',
      '}',
      'console.log(JSON.stringify(seen));',
    ].join('\n');
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', code]);
    // Not loaded by making the provider; loaded by its warm-up (and so still loaded for the second).
    expect(JSON.parse(stdout)).toEqual([false, true, true, true]);
    // The model's server, which both providers were given, heard nothing: a warm-up never calls it.
    expect(server.requests).toHaveLength(0);
  });
});

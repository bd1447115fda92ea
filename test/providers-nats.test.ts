import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunResultSchema } from '@polish/protocol';
import { startNats, type NatsFixture } from './support/nats.js';
import { startHost, stop, cleanEnvironment } from './support/processes.js';
import { startFakeModelServer, type RecordedRequest } from './support/fake-model-server.js';
import { anthropicDialect } from './support/fake-anthropic.js';
import { openaiDialect } from './support/fake-openai.js';
import { fakeAnswer, roleOf } from './support/fake-llm.js';
import { polish } from './support/cli.js';

const KEY = `sk-ant-secret-${Math.random().toString(36).slice(2)}`;
const scratch = mkdtempSync(join(tmpdir(), 'polish-providers-'));
const artifact = join(scratch, 'limits.md');
writeFileSync(artifact, '# Limits\nversion 1 of the rate limit page.\n');
const goal = 'Document the rate limiter.';

type Block = { text: string };
const anthropicText = (request: RecordedRequest) => ({
  system: ((request.body.system as Block[])[0] as Block).text,
  user: (request.body.messages as { content: string | Block[] }[])
    .map((message) =>
      typeof message.content === 'string' ? message.content : message.content.map((block) => block.text).join(''),
    )
    .join('\n'),
});
const openaiText = (request: RecordedRequest) => {
  const messages = request.body.messages as { content: string }[];
  return {
    system: messages[0]?.content ?? '',
    user: messages
      .slice(1)
      .map((message) => message.content)
      .join('\n'),
  };
};
describe('real providers in worker processes over NATS', () => {
  let nats: NatsFixture;
  beforeAll(async () => {
    // The server traces every message it routes, payloads included: the wire, as seen by NATS.
    // (A test subscriber on ">" would count as a responder for task subjects and hide "no responders".)
    nats = await startNats({ trace: true });
  });
  afterAll(async () => {
    await nats.stop();
  });

  it('runs a whole loop with Anthropic workers, and the key never leaves the worker machine', async () => {
    const claude = await startFakeModelServer(anthropicDialect, (request) => {
      const { system, user } = anthropicText(request);
      return { answer: fakeAnswer(roleOf(system), user) };
    });
    const host = await startHost(
      nats.server.url,
      ['--pool', '2', '--model', `anthropic:claude-test@${claude.url}`],
      cleanEnvironment({ ANTHROPIC_API_KEY: KEY }),
    );
    try {
      const run = await polish(['run', artifact, '--goal', goal, '--nats', nats.server.url, '--json'], {
        env: cleanEnvironment(),
      });
      expect(run.code).toBe(0);
      const result = RunResultSchema.parse(JSON.parse(run.stdout));
      expect([result.status, result.iterations]).toEqual(['CONVERGED', 3]);
      expect(result.models).toEqual([{ provider: 'anthropic', model: 'claude-test', scripted: false }]);
      expect(result.usage.output_tokens).toBe(claude.reported.output_tokens);
      expect(claude.requests).toHaveLength(6);
      for (const request of claude.requests) expect(request.headers.authorization).toBe(`Bearer ${KEY}`);
      const wire = nats.trace();
      expect(wire).toContain('MSG_PAYLOAD: ["{\\"v\\":1,\\"taskId\\"');
      expect(wire).toContain('version 2 of the rate limit page');
      for (const text of [wire, run.stdout, run.stderr, host.lines.join('\n')]) expect(text).not.toContain(KEY);
    } finally {
      await stop(host);
      await claude.stop();
    }
  });

  it('runs with per-role models: an OpenAI-compatible model for criteria and evaluation, Claude for revision', async () => {
    const claude = await startFakeModelServer(anthropicDialect, (request) => {
      const { system, user } = anthropicText(request);
      return { answer: fakeAnswer(roleOf(system), user) };
    });
    const local = await startFakeModelServer(openaiDialect, (request) => {
      const { system, user } = openaiText(request);
      return { answer: fakeAnswer(roleOf(system), user) };
    });
    const host = await startHost(
      nats.server.url,
      [
        '--pool',
        '2',
        '--model',
        `openai:llama-test@${local.url}/v1`,
        '--reviser-model',
        `anthropic:claude-test@${claude.url}`,
      ],
      // An OpenAI key in the environment must not be sent to some other OpenAI-compatible server.
      cleanEnvironment({ ANTHROPIC_API_KEY: KEY, OPENAI_API_KEY: 'sk-openai-not-for-others' }),
    );
    try {
      const run = await polish(['run', artifact, '--goal', goal, '--nats', nats.server.url, '--json'], {
        env: cleanEnvironment(),
      });
      expect(run.code).toBe(0);
      const result = RunResultSchema.parse(JSON.parse(run.stdout));
      expect(result.status).toBe('CONVERGED');
      expect(local.requests.map((request) => roleOf(openaiText(request).system))).toEqual([
        'criteria',
        'evaluate',
        'evaluate',
        'evaluate',
      ]);
      expect(claude.requests.map((request) => roleOf(anthropicText(request).system))).toEqual(['revise', 'revise']);
      expect(Object.keys(result.usage_by_model).sort()).toEqual(['anthropic:claude-test', 'local:llama-test']);
      for (const request of local.requests)
        expect(String(request.headers.authorization)).not.toContain('sk-openai-not-for-others');
      expect(host.lines).toContain(`polish worker: model for criteria, evaluate: openai:llama-test@${local.url}/v1`);
      // Workers that use a model SDK start from the startup snapshot too, as the host logs it:
      // the SDK loads after the restore (scripts/bundle-worker.js), and these answers came through it.
      const snapshotOf = new Map<string, Set<string>>();
      for (const line of host.lines) {
        const [, role, from] = /^worker \d+ \((\w+)\) started from (.+); \d+ alive$/.exec(line) ?? [];
        if (role && from) snapshotOf.set(role, (snapshotOf.get(role) ?? new Set()).add(from));
      }
      expect(Object.fromEntries([...snapshotOf].map(([role, blobs]) => [role, [...blobs]]))).toEqual({
        criteria: ['the startup snapshot'],
        evaluate: ['the startup snapshot'],
        revise: ['the startup snapshot'],
      });
      // And each warmed its SDK up while booting (fetch loaded, no request: the servers' counts above).
      // Loading fetch in a fresh process takes tens of ms: a warm-up that did nothing would read 0.
      const ready = host.lines.filter((line) => / ready in /.test(line));
      expect(ready.length).toBeGreaterThanOrEqual(3);
      for (const line of ready) expect(line).toMatch(/, warm-up \d+ \(model [1-9]\d*\), queue /);
    } finally {
      await stop(host);
      await Promise.all([claude.stop(), local.stop()]);
    }
  });
});

describe('model configuration on the command line', () => {
  it('polish run with no key and no model says exactly what to set, exit 2, before starting anything', async () => {
    const run = await polish(['run', artifact, '--goal', goal], { env: cleanEnvironment() });
    expect(run.code).toBe(2);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^polish: invalid input: ANTHROPIC_API_KEY: ANTHROPIC_API_KEY is not set, and anthropic:claude-sonnet-5-5 \(used by criteria, evaluate, revise\) needs it/,
    );
    expect(lines[0]).toContain('--model ollama:<model>');
    expect(lines[0]).toContain('--model scripted:answers.yaml');
    expect(lines[0]).not.toContain('started nats-server');
  });

  it('polish worker with an Anthropic model and no key refuses to start, naming the variable', async () => {
    const run = await polish(['worker', '--nats', 'nats://127.0.0.1:1', '--model', 'anthropic:claude-test'], {
      env: cleanEnvironment(),
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('polish: invalid input: ANTHROPIC_API_KEY:');
  });

  it.each([
    [['--model', 'gpt-4'], 'model: "gpt-4" is not a model spec'],
    [['--evaluator-model', 'mystery:x'], 'evaluator-model: unknown provider "mystery"'],
    [['--model', 'openai:x@not a url'], 'model: "openai:x@not a url": baseURL:'],
  ])('a bad model spec %j is invalid input naming the flag', async (flags, message) => {
    const run = await polish(['run', artifact, '--goal', goal, ...flags], {
      env: cleanEnvironment({ ANTHROPIC_API_KEY: 'x' }),
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`polish: invalid input: --${message}`);
  });
});

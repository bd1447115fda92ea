import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatModelSettings } from '@polish/agents';
import { resolveModels } from './models.js';
import { PolishError } from '@polish/protocol';

const directory = mkdtempSync(join(tmpdir(), 'polish-models-'));
const config = join(directory, 'polish.yaml');
writeFileSync(
  config,
  'model: openai:config-model@http://127.0.0.1:9/v1\nevaluator_model: ollama:config-evaluator\ntimeout_seconds: 7\nprices:\n  "local:*": { input: 1, output: 2 }\n',
);
const keys = { ANTHROPIC_API_KEY: 'k', OPENAI_API_KEY: 'k' };
const specs = (resolved: ReturnType<typeof resolveModels>) =>
  Object.fromEntries(Object.entries(resolved.byRole).map(([role, settings]) => [role, formatModelSettings(settings)]));

describe('resolveModels: which model each role gets', () => {
  it.each([
    [
      'nothing set: the default',
      {},
      {},
      {
        criteria: 'anthropic:claude-sonnet-5-5',
        evaluate: 'anthropic:claude-sonnet-5-5',
        revise: 'anthropic:claude-sonnet-5-5',
      },
    ],
    [
      '--model for all roles',
      { model: 'openai:gpt-4.1' },
      {},
      { criteria: 'openai:gpt-4.1', evaluate: 'openai:gpt-4.1', revise: 'openai:gpt-4.1' },
    ],
    [
      'a role flag beats --model',
      { model: 'anthropic:claude-sonnet-5-5', evaluatorModel: 'openai:gpt-4.1' },
      {},
      { criteria: 'anthropic:claude-sonnet-5-5', evaluate: 'openai:gpt-4.1', revise: 'anthropic:claude-sonnet-5-5' },
    ],
    [
      'the environment, role variable first',
      {},
      { POLISH_MODEL: 'openai:gpt-4.1', POLISH_REVISER_MODEL: 'anthropic:claude-haiku-5-5' },
      { criteria: 'openai:gpt-4.1', evaluate: 'openai:gpt-4.1', revise: 'anthropic:claude-haiku-5-5' },
    ],
    [
      'flags beat the environment',
      { model: 'ollama:llama3.1' },
      { POLISH_EVALUATOR_MODEL: 'openai:gpt-4.1' },
      {
        criteria: 'openai:llama3.1@http://127.0.0.1:11434/v1',
        evaluate: 'openai:llama3.1@http://127.0.0.1:11434/v1',
        revise: 'openai:llama3.1@http://127.0.0.1:11434/v1',
      },
    ],
    [
      'the config file, role key first',
      { config },
      {},
      {
        criteria: 'openai:config-model@http://127.0.0.1:9/v1',
        evaluate: 'openai:config-evaluator@http://127.0.0.1:11434/v1',
        revise: 'openai:config-model@http://127.0.0.1:9/v1',
      },
    ],
    [
      'the environment beats the config file',
      { config },
      { POLISH_MODEL: 'openai:gpt-4.1' },
      { criteria: 'openai:gpt-4.1', evaluate: 'openai:gpt-4.1', revise: 'openai:gpt-4.1' },
    ],
  ])('%s', (_name, flags, environment, expected) => {
    expect(specs(resolveModels(flags, { ...keys, ...environment }))).toEqual(expected);
  });

  it('takes call settings and prices from the config file', () => {
    const resolved = resolveModels({ config }, keys);
    expect(resolved.byRole.criteria).toMatchObject({ timeoutMs: 7000 });
    expect(resolved.prices['local:*']).toEqual({ input: 1, output: 2 });
    expect(resolved.prices['anthropic:claude-sonnet-5-5']).toBeDefined();
  });

  it('treats --provider scripted --script like --model scripted:FILE', () => {
    const script = join(directory, 'answers.yaml');
    writeFileSync(script, 'evaluate: []\n');
    expect(specs(resolveModels({ provider: 'scripted', script }, {})).evaluate).toBe(`scripted:${script}`);
  });

  it.each([
    [{}, {}, 'ANTHROPIC_API_KEY'],
    [{ evaluatorModel: 'openai:gpt-4.1' }, { ANTHROPIC_API_KEY: 'k' }, 'OPENAI_API_KEY'],
    [{ config: join(directory, 'missing.yaml') }, keys, 'config'],
  ])('names what is missing: %j → %s', (flags, environment, field) => {
    expect(() => resolveModels(flags, environment)).toThrow(PolishError);
    try {
      resolveModels(flags, environment);
    } catch (error) {
      expect((error as PolishError).code).toBe('INVALID_INPUT');
      expect((error as PolishError).field).toBe(field);
    }
  });

  it('needs no key for a local OpenAI-compatible server', () => {
    expect(() => resolveModels({ model: 'ollama:llama3.1' }, {})).not.toThrow();
  });
});

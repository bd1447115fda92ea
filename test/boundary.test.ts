import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from './support/cli.js';

function sources(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(directory, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(directory, entry.name)]
        : [],
  );
}

describe('the process boundary (DESIGN §3): orchestrator and agents share only the protocol', () => {
  it.each([
    ['orchestrator', 'agents'],
    ['agents', 'orchestrator'],
  ])('%s neither depends on nor imports %s', (from, to) => {
    const manifest = JSON.parse(readFileSync(`${REPO}packages/${from}/package.json`, 'utf8'));
    expect(Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })).not.toContain(`@polish/${to}`);
    for (const file of sources(`${REPO}packages/${from}/src`)) {
      const text = readFileSync(file, 'utf8');
      expect(text, file).not.toMatch(new RegExp(`from '(@polish/${to}|(\\.\\./)+${to}/)`));
    }
  });

  it('keeps the protocol free of other polish packages', () => {
    for (const file of sources(`${REPO}packages/protocol/src`)) {
      expect(readFileSync(file, 'utf8'), file).not.toMatch(/from '@polish\//);
    }
  });
});

describe('wire names (subjects, streams, buckets, consumers) are built only in packages/protocol', () => {
  // A subject, stream or bucket name written out by hand: `polish.v1.…`, `POLISH_EVENTS`,
  // `polish_runs`, `$KV.…`, `$JS.API.…`, … Comments may name them; code may not.
  const WIRE_LITERAL = /polish\.v\d+\.|[A-Z]+_(EVENTS|TASKS|REPLIES)\b|polish_(runs|artifacts)|['`"]\$(KV|O|JS|SRV)\./;
  const code = (text: string) =>
    text
      .split('\n')
      .filter((line) => !/^\s*(\/\/|\*|\/\*\*)/.test(line))
      .join('\n');

  it.each(['orchestrator', 'agents', 'cli', 'inspector'])('packages/%s builds none by hand', (name) => {
    for (const file of sources(`${REPO}packages/${name}/src`).filter((path) => !path.endsWith('.test.ts'))) {
      expect(code(readFileSync(file, 'utf8')), file).not.toMatch(WIRE_LITERAL);
    }
  });

  it('the benchmarks build none by hand', () => {
    for (const entry of readdirSync(`${REPO}bench`).filter((name) => name.endsWith('.js'))) {
      expect(code(readFileSync(`${REPO}bench/${entry}`, 'utf8')), entry).not.toMatch(WIRE_LITERAL);
    }
  });
});

import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const compileCache = new URL('../dist/compile-cache.js', import.meta.url).href;
/** A module loaded after the cache is on, so that its bytecode is cached. */
const later = new URL('../dist/prompts.js', import.meta.url).href;

/** Enables the cache in a fresh process (it can be enabled once per process), returns what it answered. */
function enableIn(environment: NodeJS.ProcessEnv): string {
  const code = `import { enableCompileCache } from '${compileCache}'; console.log(String(enableCompileCache())); await import('${later}');`;
  const { NODE_DISABLE_COMPILE_CACHE: _ignored, ...rest } = process.env;
  const outcome = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    env: { ...rest, ...environment },
    encoding: 'utf8',
  });
  expect(outcome.stderr).toBe('');
  return outcome.stdout.trim();
}

describe('compile cache', () => {
  it('lives in a folder only this user can enter, under $XDG_CACHE_HOME, and is written to', () => {
    const cacheHome = mkdtempSync(join(tmpdir(), 'polish-cache-'));
    const answered = enableIn({ XDG_CACHE_HOME: cacheHome });
    const folder = join(cacheHome, 'polish', 'compile-cache');
    expect(answered).toBe(folder);
    expect(statSync(folder).mode & 0o777).toBe(0o700);
    // The process wrote the bytecode of what it loaded after enabling it.
    expect(readdirSync(folder, { recursive: true }).length).toBeGreaterThan(1);
  });

  it('is not used in a folder that others can write to', () => {
    const cacheHome = mkdtempSync(join(tmpdir(), 'polish-cache-'));
    const folder = join(cacheHome, 'polish', 'compile-cache');
    mkdirSync(folder, { recursive: true });
    chmodSync(folder, 0o777);
    expect(enableIn({ XDG_CACHE_HOME: cacheHome })).toBe('undefined');
    expect(readdirSync(folder)).toEqual([]);
  });

  it('is not used below a folder that others may change (they could swap its bytecode)', () => {
    const cacheHome = mkdtempSync(join(tmpdir(), 'polish-cache-'));
    chmodSync(cacheHome, 0o777);
    expect(enableIn({ XDG_CACHE_HOME: cacheHome })).toBe('undefined');
    chmodSync(cacheHome, 0o755);
    expect(enableIn({ XDG_CACHE_HOME: cacheHome })).toBe(join(cacheHome, 'polish', 'compile-cache'));
  });

  it('is off with NODE_DISABLE_COMPILE_CACHE=1', () => {
    const cacheHome = mkdtempSync(join(tmpdir(), 'polish-cache-'));
    expect(enableIn({ XDG_CACHE_HOME: cacheHome, NODE_DISABLE_COMPILE_CACHE: '1' })).toBe('undefined');
  });
});

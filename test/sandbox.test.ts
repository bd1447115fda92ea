// Issue 15, the red-team case: a command critique runs code the model wrote. Here that code does
// what the attacker did — reads its parent's /proc/<pid>/environ and every other, prints its
// environment, leaves a setsid child behind — through the real CLI (`polish par run`, embedded:
// nats-server, host and worker processes). Nothing the CLI, the host or the worker holds may
// reach the command, the evidence, the report or the task file, and nothing may outlive it.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planSandbox } from '@polish/agents';
import { polish } from './support/cli.js';
import { parRunArgs, workspace } from './support/par-workspace.js';

const token = `polish-probe-${Math.random().toString(36).slice(2)}`;
const secrets = {
  AGENT_COLLAB_HUMAN_KEYS_JSON: JSON.stringify({ alice: `human-key-${token}` }),
  ANTHROPIC_API_KEY: `sk-ant-${token}`,
  AWS_SECRET_ACCESS_KEY: `aws-${token}`,
  DB_PASSWORD: `db-${token}`,
  PGPASSWORD: `pg-${token}`,
  GITHUB_PAT: `ghp_${token.replace(/-/g, '')}`,
  OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer otel-${token}`,
  lowercase_secret: `lower-${token}`,
};

/** Every file polish wrote under .coord/, as one text. */
function coordText(directory: string): string {
  const texts: string[] = [];
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else texts.push(readFileSync(path, 'utf8'));
    }
  };
  walk(join(directory, '.coord'));
  return texts.join('\n');
}

describe('a critique command cannot reach the secrets around it (polish par run, embedded)', () => {
  it("reading /proc/$PPID/environ and every process's environment, printing env, and leaving a setsid child: no secret anywhere, nothing left running", async () => {
    const ws = workspace();
    writeFileSync(
      join(ws.directory, 'probe.sh'),
      [
        // What an attacker looks for, printed last so it is in the output's tail the worker keeps.
        'pattern="key|secret|pass|token|pat|auth|otel|agent_collab"',
        '{ tr "\\0" "\\n" < /proc/$PPID/environ; for file in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$file"; done; env; } 2>/dev/null | grep -iE "$pattern" | sort -u | tail -c 3000',
        `setsid sh -c 'exec sleep 1000 ${token}' > /dev/null 2>&1 < /dev/null &`,
        'echo probed',
        'exit 1',
      ].join('\n'),
    );
    // The CLI holds every secret in its environment, as the attacker found it; its host and worker inherit it.
    const outcome = await polish(
      parRunArgs({
        directory: ws.directory,
        critique: ['--critique', 'command', '--command', 'sh probe.sh'],
        script: ws.script,
      }),
      { env: { ...process.env, ...secrets } },
    );
    expect(outcome.stderr).toContain('par: command critique: `sh probe.sh` exit 1');
    const kept = coordText(ws.directory);
    // The probe ran, and its output is kept as evidence...
    expect(kept).toContain('probed');
    // ...but it saw none of the values, under any name.
    for (const value of Object.values(secrets)) {
      expect(kept).not.toContain(value);
      expect(outcome.stdout + outcome.stderr).not.toContain(value);
    }
    expect(kept).not.toContain(token);
    // The setsid child died with the command.
    const survivors = readdirSync('/proc').filter((pid) => {
      try {
        return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(token);
      } catch {
        return false;
      }
    });
    expect(survivors).toEqual([]);
  }, 120_000);
});

describe('a critique command cannot undo its sandbox', () => {
  // Root of its own user namespace (the worker run by any other user) may unmount the /proc that
  // unshare mounted, and the machine's /proc is under it: every process and its command line.
  // The command must hold no capability to do so, whoever runs the worker.
  const escape =
    'umount /proc 2>/dev/null; echo "caps $(grep CapEff /proc/self/status | cut -f2) bnd $(grep CapBnd /proc/self/status | cut -f2)"; ' +
    `test -e /proc/${process.pid} && echo "sees the test"; echo "pids $(ls /proc | grep -c '^[0-9]')"`;
  const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'];

  it.each([
    ['root', true, [] as string[]],
    ['another user', false, asNobody],
  ])('run by %s, it cannot unmount its /proc to see the machine', (_who, asRoot, runAs) => {
    if (runAs.length > 0) {
      // The user's own right to make a user namespace (Debian's default), which the plan relies on.
      const probe = spawnSync(runAs[0] as string, [...runAs.slice(1), 'unshare', '--user', 'true'], { cwd: '/' });
      expect(probe.status, 'this test needs unprivileged user namespaces').toBe(0);
    }
    const plan = planSandbox(process.env, asRoot);
    expect(plan.kind).toBe('namespaces');
    const [program = '', ...args] = [...runAs, ...plan.argv(escape)];
    const run = spawnSync(program, args, { cwd: '/', encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain('caps 0000000000000000 bnd 0000000000000000');
    expect(run.stdout).not.toContain('sees the test');
    // sh, its subshell, ls and grep: nothing of the machine's (with its /proc unmounted, about 80 here).
    expect(Number(/pids (\d+)/.exec(run.stdout)?.[1])).toBeLessThanOrEqual(4);
  });
});

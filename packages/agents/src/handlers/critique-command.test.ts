import { mkdtempSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { handleTask } from '../handle-task.js';
import { createScriptedProvider } from '../providers/scripted-provider.js';
import { runCritiqueCommand, OUTPUT_TAIL_CHARS } from './critique-command.js';

/** A par.command task through the whole handler path (schema check included). */
const commandTask = (taskId: string, payload: Record<string, unknown>) =>
  handleTask(
    { v: 1, taskId, role: 'par.command', attempt: 1, deadline: 0, payload },
    createScriptedProvider(() => ({})),
  );

const files = { 'check.sh': 'echo "checking $(cat input.txt)"\nexit 3\n', 'input.txt': 'the artifact' };

describe('par.command: a command critique against the artifact', () => {
  it('writes the artifact to a temporary workspace, runs the command there, and returns its exit code and output', async () => {
    const { value, usage } = await runCritiqueCommand({ artifact: files, command: 'sh check.sh', timeout_ms: 10_000 });
    expect(value).toMatchObject({ exit_code: 3, timed_out: false, output_tail: 'checking the artifact\n' });
    expect(usage.model_calls).toBe(0);
  });

  it('kills the whole process group at the timeout, and says so', async () => {
    // The child of sh keeps the pipe open: only killing the group ends it.
    const { value } = await runCritiqueCommand({
      artifact: files,
      command: 'sleep 30 & sleep 30; wait',
      timeout_ms: 200,
    });
    expect(value).toMatchObject({ exit_code: null, timed_out: true });
  });

  it('keeps only the tail of a long output', async () => {
    const { value } = await runCritiqueCommand({
      artifact: files,
      command: `yes line | head -n 5000; echo THE-END`,
      timeout_ms: 10_000,
    });
    expect(value.output_tail).toHaveLength(OUTPUT_TAIL_CHARS);
    expect(value.output_tail.endsWith('THE-END\n')).toBe(true);
  });

  it("does not hand the worker's keys to the command", async () => {
    const environment = {
      ...process.env,
      ANTHROPIC_API_KEY: 'sk-ant-secret',
      OPENAI_API_KEY: 'sk-secret',
      AGENT_COLLAB_HUMAN_KEYS_JSON: '{"a":"b"}',
    };
    const { value } = await runCritiqueCommand({ artifact: files, command: 'env', timeout_ms: 10_000 }, environment);
    expect(value.output_tail).not.toMatch(/secret|AGENT_COLLAB/);
    expect(value.output_tail).toContain('PATH=');
  });

  it('a par.command task with a field the schema does not know is rejected before anything runs', async () => {
    const reply = await commandTask('t1', {
      artifact: files,
      command: 'touch /tmp/should-not-run',
      timeout_ms: 1000,
      run_id: 'r1',
    });
    expect(reply.ok).toBe(false);
    expect(!reply.ok && reply.error).toMatchObject({ code: 'INVALID_INPUT' });
    expect(!reply.ok && reply.error.message).toContain('run_id');
  });

  it('refuses paths that leave the workspace', async () => {
    const reply = await commandTask('t2', { artifact: { '../escape.txt': 'x' }, command: 'true', timeout_ms: 1000 });
    expect(reply.ok).toBe(false);
  });
});

describe('par.command in its sandbox (issue 15: model-written code against the worker)', () => {
  const secret = `s3cr3t-${Math.random().toString(36).slice(2)}-value`;
  const environment = {
    ...process.env,
    ANTHROPIC_API_KEY: `sk-ant-${secret}`,
    AWS_SECRET_ACCESS_KEY: `aws-${secret}`,
    DB_PASSWORD: `db-${secret}`,
    PGPASSWORD: `pg-${secret}`,
    GITHUB_PAT: `ghp${secret.replace(/-/g, '')}`,
    lower_case_token: `lower-${secret}`,
    POLISH_WORKER_CONFIG: JSON.stringify({ auth: { user: 'evaluate', pass: `nats-${secret}` } }),
  };

  it('gets only allow-listed variables, and never a secret of the worker', async () => {
    const { value } = await runCritiqueCommand({ artifact: files, command: 'env', timeout_ms: 10_000 }, environment);
    const names = value.output_tail
      .split('\n')
      .map((line) => line.split('=')[0])
      .filter((name): name is string => Boolean(name));
    // Only the allow-list (and what sh itself sets), never a key, a token, a password or the worker's config.
    const allowed = new Set(['HOME', 'TMPDIR', 'PATH', 'LANG', 'LC_ALL', 'TZ', 'TERM', 'PWD', 'SHLVL', '_', 'OLDPWD']);
    expect(names.filter((name) => !allowed.has(name))).toEqual([]);
    expect(names).toContain('PATH');
    expect(value.output_tail).not.toContain(secret);
  });

  it('sees no process but its own: no /proc/<worker>/environ, no parent to read', async () => {
    const probe = [
      'echo "ppid=$PPID"',
      'ls /proc | grep -E "^[0-9]+$" | tr "\\n" " "; echo',
      'cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"',
      `grep -rl "${secret}" /proc/*/environ 2>/dev/null; echo "grep done"`,
    ].join('; ');
    const { value } = await runCritiqueCommand({ artifact: files, command: probe, timeout_ms: 10_000 }, environment);
    expect(value.output_tail).toContain('ppid=0');
    expect(value.output_tail).toContain('grep done');
    expect(value.output_tail).not.toContain(secret);
  });

  it("runs as an unprivileged user when the worker is root, and cannot read the worker's files", async () => {
    if (process.getuid?.() !== 0) return;
    const { value } = await runCritiqueCommand(
      {
        artifact: files,
        command:
          'id -u; cat /proc/self/status | grep CapEff; cat /root/.bashrc > /dev/null && echo read || echo refused',
        timeout_ms: 10_000,
      },
      environment,
    );
    expect(value.output_tail).toMatch(/^65534\n/);
    expect(value.output_tail).toContain('CapEff:\t0000000000000000');
    expect(value.output_tail).toContain('refused');
  });

  it('takes every process it started down at the timeout, setsid or not', async () => {
    const token = `polish-sandbox-${Math.random().toString(36).slice(2)}`;
    const { value } = await runCritiqueCommand(
      {
        artifact: files,
        command: `setsid sh -c 'exec sleep 1000 ${token}' > /dev/null 2>&1 < /dev/null & nohup sleep 1001 ${token} > /dev/null 2>&1 & sleep 60`,
        timeout_ms: 300,
      },
      environment,
    );
    expect(value.timed_out).toBe(true);
    const survivors = readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(token);
        } catch {
          return false;
        }
      });
    expect(survivors).toEqual([]);
  });

  it('cuts known secret values out of what it printed, even ones it was not given', async () => {
    // A secret the command could only have by other means (say, in a file of the artifact).
    const leaky = { ...files, 'leak.txt': `pg=pg-${secret}\n` };
    const { value } = await runCritiqueCommand(
      { artifact: leaky, command: 'cat leak.txt', timeout_ms: 10_000 },
      environment,
    );
    expect(value.output_tail).toBe('pg=[redacted]\n');
  });

  it('is refused where no sandbox can be made, unless the worker allows it', async () => {
    // A PATH with a shell and no unshare: no namespaces can be made.
    const bin = mkdtempSync(join(tmpdir(), 'polish-no-unshare-'));
    symlinkSync('/bin/sh', join(bin, 'sh'));
    const bare = { ...environment, PATH: bin };
    await expect(runCritiqueCommand({ artifact: files, command: 'true', timeout_ms: 1_000 }, bare)).rejects.toThrow(
      /cannot sandbox critique commands .* --allow-unsandboxed/,
    );
    const allowed = await runCritiqueCommand(
      { artifact: files, command: 'echo "ppid=$PPID"', timeout_ms: 5_000 },
      bare,
      {
        allowUnsandboxed: true,
      },
    );
    // Unsandboxed, it runs as a child of this process: exactly what the sandbox prevents.
    expect(allowed.value.output_tail).toBe(`ppid=${process.pid}\n`);
  });
});

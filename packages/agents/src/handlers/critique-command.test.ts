import { describe, expect, it } from 'vitest';
import { handleTask } from '../handle-task.js';
import { createScriptedProvider } from '../providers/scripted-provider.js';
import { runCritiqueCommand, OUTPUT_TAIL_CHARS } from './critique-command.js';

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
    const reply = await handleTask(
      {
        v: 1,
        taskId: 't1',
        role: 'par.command',
        attempt: 1,
        deadline: 0,
        payload: { artifact: files, command: 'touch /tmp/should-not-run', timeout_ms: 1000, run_id: 'r1' },
      },
      createScriptedProvider(() => ({})),
    );
    expect(reply.ok).toBe(false);
    expect(!reply.ok && reply.error).toMatchObject({ code: 'INVALID_INPUT' });
    expect(!reply.ok && reply.error.message).toContain('run_id');
  });

  it('refuses paths that leave the workspace', async () => {
    const reply = await handleTask(
      {
        v: 1,
        taskId: 't2',
        role: 'par.command',
        attempt: 1,
        deadline: 0,
        payload: { artifact: { '../escape.txt': 'x' }, command: 'true', timeout_ms: 1000 },
      },
      createScriptedProvider(() => ({})),
    );
    expect(reply.ok).toBe(false);
  });
});

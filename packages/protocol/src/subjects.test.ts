import { describe, expect, it } from 'vitest';
import { modelLane, natsServers, taskQueueOf, taskSubject } from './subjects.js';

describe('subjects and addresses', () => {
  it("a NATS address is one URL or a comma-separated list of a cluster's servers", () => {
    expect(natsServers('nats://a:4222')).toEqual(['nats://a:4222']);
    expect(natsServers(' nats://a:4222, nats://b:4222 ,,nats://c:4222')).toEqual([
      'nats://a:4222',
      'nats://b:4222',
      'nats://c:4222',
    ]);
  });
  it('task subjects carry the prefix, the protocol version and the role', () => {
    expect(taskSubject('par.command')).toBe('polish.v1.task.par.command');
    expect(taskSubject('evaluate', 'team-a')).toBe('team-a.v1.task.evaluate');
  });

  it("a model's lane is its provider:model as one token, safe as a subject token and a consumer name", () => {
    expect(modelLane('anthropic:claude-sonnet-5-5')).toBe('anthropic_claude-sonnet-5-5');
    expect(modelLane('openai:gpt-5.1')).toBe('openai_gpt-5_1');
    expect(modelLane(' openai:org/model.v2 ')).toBe('openai_org_model_v2');
    expect(() => modelLane('  ')).toThrow('"  " gives no usable lane name (empty)');
  });
  it("a task waits in its role's queue, or in one of its role's model lanes (a stream of their own)", () => {
    expect(taskQueueOf('evaluate')).toEqual({
      stream: 'POLISH_TASKS',
      consumer: 'evaluate',
      subject: 'polish.v1.task.evaluate',
      label: 'evaluate',
    });
    expect(taskQueueOf('par.plan', undefined, 'team-a')).toMatchObject({
      stream: 'TEAM-A_TASKS',
      consumer: 'par_plan',
    });
    expect(taskQueueOf('evaluate', 'openai_gpt-5', 'team-a')).toEqual({
      stream: 'TEAM-A_LANES_EVALUATE',
      consumer: 'openai_gpt-5',
      subject: 'team-a.v1.lane.evaluate.openai_gpt-5',
      label: 'evaluate lane openai_gpt-5',
    });
    expect(() => taskQueueOf('revise', 'openai_gpt-5')).toThrow('revise tasks have no lanes (only evaluate)');
    expect(() => taskQueueOf('evaluate', 'a.b')).toThrow('"a.b" is not a lane name');
    expect(() => taskQueueOf('evaluate', '>')).toThrow('">" is not a lane name');
  });
});

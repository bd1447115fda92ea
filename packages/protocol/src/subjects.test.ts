import { describe, expect, it } from 'vitest';
import { natsServers, taskSubject } from './subjects.js';

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
});

import { describe, expect, it } from 'vitest';
import { chooseBoots, type RoleLoad } from './pool-balance.js';

const load = (role: RoleLoad['role'], idle: number, booting = 0, queued = 0): RoleLoad => ({
  role,
  idle,
  booting,
  queued,
});

describe('which workers a host boots (pool balance)', () => {
  it('fills each role to its pool, fewest first, within the process limit', () => {
    const plan = chooseBoots([load('criteria', 0), load('evaluate', 0), load('revise', 0)], {
      pool: 2,
      free: 4,
      bootSlots: 10,
    });
    expect(plan.boot).toEqual(['criteria', 'evaluate', 'revise', 'criteria']);
    expect(plan.settled).toBe(true);
    expect(plan.retire).toBeUndefined();
  });

  it('boots no more than may boot at once, and is not settled until the pools are full', () => {
    const plan = chooseBoots([load('evaluate', 0)], { pool: 3, free: 8, bootSlots: 1 });
    expect(plan.boot).toEqual(['evaluate']);
    expect(plan.settled).toBe(false);
  });

  it('boots one worker more per waiting task, a role with tasks and no worker first', () => {
    const plan = chooseBoots([load('criteria', 1, 0, 5), load('evaluate', 0, 0, 1)], {
      pool: 1,
      free: 3,
      bootSlots: 3,
    });
    expect(plan.boot[0]).toBe('evaluate');
    expect(plan.boot.filter((role) => role === 'criteria')).toHaveLength(2);
  });

  it('at the limit, gives a role with tasks and no worker the place of an idle worker of a role with none', () => {
    const plan = chooseBoots([load('criteria', 2), load('evaluate', 0, 0, 4), load('revise', 1)], {
      pool: 2,
      free: 0,
      bootSlots: 3,
    });
    expect(plan.boot).toEqual([]);
    expect(plan.retire).toEqual({ from: 'criteria', to: 'evaluate' });
  });

  it('never takes the place of a worker whose role has tasks waiting', () => {
    const plan = chooseBoots([load('criteria', 1, 0, 3), load('evaluate', 0, 0, 4)], {
      pool: 2,
      free: 0,
      bootSlots: 3,
    });
    expect(plan.retire).toBeUndefined();
  });

  it("waits with an answering worker's successor, idle workers or not, but boots at once for a task in the queue", () => {
    const limits = { pool: 2, free: 4, bootSlots: 2 };
    // One idle, one answering its last task: the pool counts as full until the answer is sent.
    expect(chooseBoots([{ ...load('evaluate', 1), answering: 1 }], limits).boot).toEqual([]);
    // No idle worker left: the successors still wait for the answers (the host bounds the wait).
    expect(chooseBoots([{ ...load('evaluate', 0), answering: 2 }], limits).boot).toEqual([]);
    // Without them counted, both would boot: what the answering count holds back.
    expect(chooseBoots([load('evaluate', 0)], limits).boot).toEqual(['evaluate', 'evaluate']);
    // A task waiting in the queue gets its worker booted at once.
    expect(chooseBoots([{ ...load('evaluate', 0, 0, 1), answering: 2 }], limits).boot).toEqual(['evaluate']);
    // …even when more workers answer than the pool holds (after a burst): they stand in for the pool only.
    expect(chooseBoots([{ ...load('evaluate', 0, 0, 1), answering: 2 }], { ...limits, pool: 1 }).boot).toEqual([
      'evaluate',
    ]);
    // A role whose only worker answers, with a task waiting, is the one with no worker: it boots first.
    const short = { pool: 1, free: 4, bootSlots: 1 };
    expect(chooseBoots([load('revise', 0), { ...load('evaluate', 0, 0, 1), answering: 1 }], short).boot).toEqual([
      'evaluate',
    ]);
  });
});

/**
 * A run record as an orchestrator leaves it in the runs bucket mid-evaluation (RUNNING, iteration 1
 * of a cap of 4), with the owner, machine version and snapshot a test needs: written by hand, to
 * show what serve and resume do with records they did not write.
 */
export const runningRecord = (record: { runId: string; owner: string; machineVersion: number; snapshot: unknown }) => ({
  runId: record.runId,
  owner: record.owner,
  machineVersion: record.machineVersion,
  status: 'RUNNING',
  state: 'evaluating',
  iteration: 1,
  cap: 4,
  createdAt: 1,
  updatedAt: 1,
  snapshot: record.snapshot,
});

// @polish/orchestrator: the public API, by capability: what the CLI, the inspector, the examples,
// bench/ and test/ use. Everything else (the quorum rule, the goal engine's steps and failure
// records, signing) is internal: the package's own tests import it by module path.

// The polish loop (DESIGN §1): the machine, its one run driver, and the verdict rule.
export { polishMachine, type PolishContext, type PolishInput } from './polish/polish-machine.js';
export { startPolish, runPolish, type RunPolishOptions, type PolishRun } from './polish/run-polish.js';
export { computeVerdict } from './polish/verdict.js';
export { resolveBudget, worstCase, type BudgetPlan } from './polish/budget.js';

// Dispatch: how a task reaches a worker (in this process, or over NATS).
export type { Dispatcher, DispatchOptions, DispatchOutcome, DispatchProgress } from './dispatch/dispatcher.js';
export { createInProcessDispatcher, type TaskHandler } from './dispatch/in-process-dispatcher.js';
export { createNatsDispatcher, type NatsDispatcherOptions } from './dispatch/nats-dispatcher.js';
export { openTaskQueue, readQueueStats, type TaskQueue, type TaskQueueOptions } from './dispatch/task-queue.js';

// Durable runs (DESIGN §6): the JetStream store, the run manager and the run service.
export { openRunStore, type RunStore } from './durable/run-store.js';
export { createRunManager, type RunManager } from './durable/run-manager.js';
export { startRunService, createRunClient, type RunClient } from './durable/run-service.js';
export { acquireOwnerLease } from './durable/owner-lease.js';
export { ensureEventStream } from './streams.js';

// Plan-act-reflect (DESIGN §2): the machine, running a task, its files and human gates.
export { parMachine } from './par/par-machine.js';
export { runPar, newParRunId, type ParRunOptions, type ParRunResult } from './par/run-par.js';
export { createParTask, recordHumanDecision, PolicyFailedClosed, DEFAULT_CHECKPOINT_REF } from './par/par-task.js';
export { coordPaths, readTaskFile, readJsonFile } from './par/coord-files.js';
export { checkGitWorkspace } from './par/git-workspace.js';

// The PAR policy engine (agent-collab-harness compatible): v1 files and v2 goal slices.
export { evaluatePolicy } from './par/evaluate-policy.js';
export { validatePolicy, checkCheckpoint, failClosed, policyHash, isVersionTwo } from './par/policy-engine.js';
export { validateGoalPolicy, validateGoalCheckpoint } from './par/goal-engine.js';
export { migrateGoal } from './par/goal-slices.js';
export { advanceGoalFile, createGoalFile } from './par/checkpoint-store.js';
export { humanKeysFrom } from './par/human-records.js';
export { parseStrictJson } from './par/strict-json.js';
export { canonicalJson, prettySortedJson } from './par/canonical-json.js';

// Memory proposals: lessons applied only with a signed human approval.
export {
  proposeMemory,
  listMemoryProposals,
  decideMemoryProposal,
  verifyMemoryLog,
} from './memory/memory-proposals.js';
export type { MemoryAction, MemoryProposal } from './memory/memory-schemas.js';

// Files written whole or not at all (results, `.coord/` files, memory proposals).
export { writeFileAtomic } from './write-file-atomic.js';

// @polish/orchestrator: the polish machine, dispatchers and the run entry point.
export {
  polishMachine,
  POLISH_MACHINE_VERSION,
  type PolishContext,
  type PolishEvent,
  type PolishEmitted,
} from './polish-machine.js';
export { computeVerdict, bestVersion } from './verdict.js';
export { toRunResult, type PolishFinalState } from './run-result.js';
export { createWaveActors, type WaveActorOptions, type WaveInput, type WaveOutput } from './wave-actors.js';
export type { Dispatcher, DispatchOptions, DispatchOutcome } from './dispatcher.js';
export { createInProcessDispatcher, type TaskHandler } from './in-process-dispatcher.js';
export { startPolish, runPolish, type RunPolishOptions, type PolishRun } from './run-polish.js';
export { createNatsDispatcher, type NatsDispatcherOptions } from './nats-dispatcher.js';
export { estimateCost } from './cost.js';
export { openRunStore, storeNames, resolveArtifacts, INLINE_LIMIT, type RunStore } from './durable/run-store.js';
export { createRunManager, type RunManager, type RunManagerOptions, type RunRecord } from './durable/run-manager.js';
export { startRunService, createRunClient, RUN_SERVICE_NAME, type RunClient } from './durable/run-service.js';
export type { WaveLedger } from './wave-actors.js';
export type { PolishInput } from './polish-machine.js';
export { acquireOwnerLease, ownerAlive, LEASE_TTL_MS } from './durable/owner-lease.js';
export {
  evaluatePolicy,
  validatePolicy,
  validateCheckpoint,
  decide,
  failClosed,
  humanKeysFrom,
  PolicyInputError,
} from './par/policy-engine.js';
export { canonicalJson } from './par/canonical-json.js';
export { classifyCycle, type CycleOutcome, type CycleClassification, type CritiqueSource } from './par/progress.js';
export {
  proposeMemory,
  listMemoryProposals,
  decideMemoryProposal,
  verifyMemoryLog,
  proposalIdOf,
  MemoryProposalError,
  MemoryProposalSchema,
  MemoryActionSchema,
  MemoryDecisionSchema,
  MemoryEventSchema,
  type MemoryProposal,
  type MemoryAction,
  type MemoryDecision,
  type MemoryEvent,
  type MemoryLogCheck,
} from './par/memory-proposals.js';
export { signHumanRecord, checkHumanKey, verifyHumanRecord } from './par/policy-engine.js';
export {
  judgeCritique,
  artifactDigest,
  lastNumber,
  type CritiqueAnswer,
  type CritiqueJudgement,
} from './par/critique.js';
export {
  parMachine,
  PAR_MACHINE_VERSION,
  pendingGates,
  pendingActionHash,
  applyChanges,
  type ParContext,
  type ParInput,
} from './par/par-machine.js';
export { runPar, checkGitWorkspace, type ParRunOptions, type ParRunResult } from './par/run-par.js';
export {
  ParInputError,
  coordPaths,
  readTaskFile,
  writeTaskFile,
  readWorkspace,
  readJsonFile,
  resolveRef,
  writeFileAtomic as writeCoordFileAtomic,
} from './par/coord-files.js';
export { renderFinalReport } from './par/final-report.js';
export {
  createParTask,
  recordHumanDecision,
  freshCheckpoint,
  DEFAULT_CHECKPOINT_REF,
  type HumanDecisionInput,
} from './par/par-task.js';

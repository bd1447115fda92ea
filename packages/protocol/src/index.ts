// @polish/protocol: the only vocabulary the orchestrator and the agents share.
export { PROTOCOL_VERSION } from './version.js';
export {
  MAX_CRITERIA,
  CriterionSchema,
  CriteriaListSchema,
  CriteriaResultSchema,
  type Criterion,
  type CriteriaResult,
} from './criteria.js';
export { ScoreSchema, EvaluationSchema, evaluationSchemaFor, type Score, type Evaluation } from './evaluation.js';
export { RevisionSchema, type Revision } from './revision.js';
export { ThresholdSchema, requiredPasses, type Threshold } from './threshold.js';
export { MAX_CAP, DEFAULT_CAP, RunSpecSchema, type RunSpec, type RunSpecInput } from './run-spec.js';
export {
  UsageSchema,
  ZERO_USAGE,
  addUsage,
  ModelInfoSchema,
  ModelPriceSchema,
  PriceTableSchema,
  modelKey,
  type Usage,
  type ModelInfo,
  type ModelPrice,
  type PriceTable,
} from './usage.js';
export {
  RoleSchema,
  TaskRoleSchema,
  WAVE_OF_ROLE,
  CriteriaPayloadSchema,
  EvaluatePayloadSchema,
  RevisePayloadSchema,
  PAYLOAD_SCHEMAS,
  RESULT_SCHEMAS,
  type Role,
  type TaskRole,
  type CriteriaPayload,
  type EvaluatePayload,
  type RevisePayload,
  type PayloadOf,
  type ResultOf,
} from './roles.js';
export { ErrorCodeSchema, WireErrorSchema, PolishError, type ErrorCode, type WireError } from './errors.js';
export {
  TaskEnvelopeSchema,
  TaskReplySchema,
  WorkerInfoSchema,
  type TaskEnvelope,
  type TaskReply,
  type WorkerInfo,
} from './task.js';
export {
  RunStatusSchema,
  IterationRecordSchema,
  RunResultSchema,
  UsageByWaveSchema,
  CostSchema,
  type UsageByWave,
  type Cost,
  type RunStatus,
  type IterationRecord,
  type RunResult,
} from './run-result.js';
export { RunEventSchema, EVENT_PAYLOAD_LIMIT, type RunEvent } from './run-event.js';
export { DEFAULT_SUBJECT_PREFIX, taskSubject, eventsSubject, natsServers } from './subjects.js';
export { renderJsonSchemas } from './json-schemas.js';
export {
  RUN_OPERATIONS,
  runServiceSubject,
  RunIdSchema,
  SubmitRequestSchema,
  RunIdRequestSchema,
  ExtendRequestSchema,
  RunSummarySchema,
  RunServiceReplySchema,
  type RunOperation,
  type RunSummary,
  type RunServiceReply,
} from './run-service.js';
export {
  LIMIT_NAMES,
  ParPolicySchema,
  ParCheckpointSchema,
  HumanDecisionSchema,
  LimitOverrideSchema,
  PolicyDecisionSchema,
  type LimitName,
  type ParPolicy,
  type ParCheckpoint,
  type HumanDecision,
  type LimitOverride,
  type PolicyDecision,
} from './par-policy.js';
export {
  ParRoleSchema,
  WorkspacePathSchema,
  ParFilesSchema,
  AcceptanceCriterionSchema,
  AcceptanceListSchema,
  CycleMemorySchema,
  ParPlanPayloadSchema,
  ParPlanSchema,
  ParActPayloadSchema,
  ParActionSchema,
  ParReviewPayloadSchema,
  ParReviewSchema,
  parReviewSchemaFor,
  ParCommandPayloadSchema,
  ParCommandResultSchema,
  CritiqueSourceSchema,
  ParFinalStatusSchema,
  ParCycleRecordSchema,
  ParTaskFileSchema,
  type ParFinalStatus,
  type ParCycleRecord,
  type ParTaskFile,
  type ParTaskFileInput,
  type ParRole,
  type ParFiles,
  type AcceptanceCriterion,
  type CycleMemory,
  type ParPlan,
  type ParAction,
  type ParReview,
  type ParCommandResult,
  type ParPlanPayload,
  type ParActPayload,
  type ParReviewPayload,
  type ParCommandPayload,
  type CritiqueSourceSpec,
} from './par.js';

// @polish/agents: role handlers, prompts, model providers.
export {
  textOf,
  type AnswerStyle,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type ModelMessage,
  type ContentPart,
} from './providers/model-provider.js';
export { createScriptedProvider, type ScriptFunction } from './providers/scripted-provider.js';
export { ScriptFileSchema, loadScriptFile, type ScriptFile, type ScriptRule } from './providers/script-file.js';
export { generateValidated, DEFAULT_MAX_REPAIRS, type ValidatedRequest } from './generate-validated.js';
export { extractCriteria } from './handlers/extract-criteria.js';
export { evaluate } from './handlers/evaluate.js';
export { revise } from './handlers/revise.js';
export type { HandlerOutput } from './handlers/handler.js';
export { handleTask, currentWorker, type RoleModels } from './handle-task.js';
export * as prompts from './prompts.js';
export { ModelSettingsSchema, createModel, type ModelSettings } from './providers/model-settings.js';
export {
  WorkerConfigSchema,
  NatsAuthSchema,
  NatsTlsSchema,
  WORKER_CONFIG_ENV,
  type WorkerConfig,
  type WorkerNotice,
  type WorkerBoot,
  type NatsAuth,
  type NatsTls,
} from './worker/worker-config.js';
export { natsConnectOptions, checkNatsAuth, readNkeySeed, wantsTls } from './nats-connect.js';
export { readOpenedFile, refuseSharedSecret, refuseUntrusted } from './checked-files.js';
export { runWorker } from './worker/run-worker.js';
export {
  createAgentHost,
  defaultMaxWorkers,
  hugePageTunables,
  youngGenerationFlags,
  type AgentHost,
  type AgentHostOptions,
  type AgentHostEvents,
  type BootSteps,
} from './host/agent-host.js';
export { backgroundBootsUnavailable, niceOf, RESERVE_NICE } from './host/priority.js';
export { keyVariableFor, missingKeyMessage } from './providers/model-settings.js';
export {
  parseModelSpec,
  formatModelSettings,
  declaredModelOf,
  laneModelOf,
  OLLAMA_BASE_URL,
} from './providers/model-spec.js';
export { DEFAULT_MAX_TOKENS } from './providers/sdk-options.js';
// The SDK-backed providers are subpath exports (`@polish/agents/anthropic`, `@polish/agents/openai`)
// so that importing the agents does not load both SDKs.
export { plan, act, review } from './handlers/par.js';
export { runCritiqueCommand, OUTPUT_TAIL_CHARS, type CommandSettings } from './handlers/critique-command.js';
export { planSandbox, type SandboxPlan } from './handlers/command-sandbox.js';
export * as parPrompts from './par-prompts.js';
// Tracing: the SDK itself loads only when an OTLP endpoint is configured.
export { startTelemetry, telemetryConfigured, type Telemetry } from './telemetry.js';

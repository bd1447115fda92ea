import { PROTOCOL_VERSION, ZERO_USAGE, type ModelInfo, type TaskEnvelope, type TaskReply } from '@polish/protocol';

/** The reply of a protocol peer written without @polish/agents: whatever result it chose, unchecked. */
export function foreignReply(
  task: TaskEnvelope,
  result: unknown,
  model: ModelInfo = { provider: 'foreign', model: 'x', scripted: true },
): TaskReply {
  return {
    v: PROTOCOL_VERSION,
    taskId: task.taskId,
    ok: true,
    result,
    usage: ZERO_USAGE,
    model,
    worker: { pid: 1, hostname: 'elsewhere' },
  };
}

// Role isolation on the wire (DESIGN §5), as one table: every principal, every subject whose
// publication or subscription matters, and who may. Written out by hand, not derived from the
// code it checks. permissions.test.ts tries every cell on a real nats-server; permission-table
// .test.ts holds the protocol's allow-lists (permissionsFor) to the same table.
export const ROLES = ['criteria', 'evaluate', 'revise', 'par.plan', 'par.act', 'par.review', 'par.command'] as const;
export type Role = (typeof ROLES)[number];
export const PRINCIPALS = ['orchestrator', 'inspector', 'client', 'host', ...ROLES] as const;
export type Principal = (typeof PRINCIPALS)[number];
const consumerOf = (role: Role) => role.replace('.', '_');
export const inboxOf = (principal: Principal) => `_INBOX_${principal.replace('.', '_')}`;

/**
 * The spec, written out by hand (not derived from the code it checks): every subject whose
 * publication matters, and who may publish it. Anyone not named is refused.
 */
export const PUBLISH: [subject: string, allowed: readonly Principal[]][] = [
  ...ROLES.flatMap((role): [string, readonly Principal[]][] => [
    // Only an orchestrator puts tasks in the queue.
    [`polish.v1.task.${role}`, ['orchestrator']],
    // Only the role's own workers pull from its consumer, ack its tasks and answer them.
    [`$JS.API.CONSUMER.MSG.NEXT.POLISH_TASKS.${consumerOf(role)}`, ['orchestrator', role]],
    [`$JS.ACK.POLISH_TASKS.${consumerOf(role)}.1.1.1.1.1`, ['orchestrator', role]],
    [`polish.v1.reply.${role}.${'a'.repeat(64)}`, [role]],
    [`polish.v1.progress.${role}.${'a'.repeat(64)}`, [role]],
    // A worker's host says it died: the host alone (it can then only make a task be handed out again).
    [`polish.v1.crashed.${role}`, ['host']],
  ]),
  // A quorum's judges by model: each model's lane of evaluate tasks (its own stream, one consumer
  // per lane). Only an orchestrator queues there; only evaluate workers pull any lane, ack and
  // read a lane's figures (and the host, to boot for it); no other role reaches a lane.
  ['polish.v1.lane.evaluate.openai_gpt-5', ['orchestrator']],
  ['polish.v1.lane.revise.openai_gpt-5', ['orchestrator']],
  ['$JS.API.CONSUMER.MSG.NEXT.POLISH_LANES_EVALUATE.openai_gpt-5', ['orchestrator', 'evaluate']],
  ['$JS.API.CONSUMER.MSG.NEXT.POLISH_LANES_EVALUATE.anthropic_claude-x', ['orchestrator', 'evaluate']],
  ['$JS.ACK.POLISH_LANES_EVALUATE.openai_gpt-5.1.1.1.1.1', ['orchestrator', 'evaluate']],
  ['$JS.API.CONSUMER.INFO.POLISH_LANES_EVALUATE.openai_gpt-5', ['orchestrator', 'inspector', 'host', 'evaluate']],
  ['$JS.API.CONSUMER.CREATE.POLISH_LANES_EVALUATE.openai_gpt-5', ['orchestrator']],
  // The inspector lists the lanes and reads their figures, as it does the role queues'.
  ['$JS.API.CONSUMER.LIST.POLISH_LANES_EVALUATE', ['orchestrator', 'inspector']],
  ['$JS.API.STREAM.MSG.GET.POLISH_LANES_EVALUATE', ['orchestrator', 'inspector']],
  // Reading queued tasks' contents: the orchestrator, and the inspector (it sees every payload in the events too).
  ['$JS.API.STREAM.MSG.GET.POLISH_TASKS', ['orchestrator', 'inspector']],
  // The queue's figures.
  ['$JS.API.CONSUMER.INFO.POLISH_TASKS.evaluate', ['orchestrator', 'inspector', 'host', 'evaluate']],
  // Runs, artifacts and events: the orchestrator writes them.
  ['$KV.polish_runs.run.forged', ['orchestrator']],
  ['$KV.polish_runs.result.r.evaluate.1', ['orchestrator']],
  ['$O.polish_artifacts.forged', ['orchestrator']],
  ['$JS.API.STREAM.MSG.GET.KV_polish_runs', ['orchestrator']],
  ['polish.v1.events.some-run', ['orchestrator']],
  ['polish.v1.inspect.some-run', ['orchestrator']],
  // Streams: made and changed only by the orchestrator (never by the inspector, issue 15).
  ['$JS.API.STREAM.CREATE.POLISH_EVENTS', ['orchestrator']],
  ['$JS.API.STREAM.UPDATE.POLISH_EVENTS', ['orchestrator']],
  ['$JS.API.STREAM.CREATE.POLISH_TASKS', ['orchestrator']],
  ['$JS.API.STREAM.PURGE.POLISH_TASKS', ['orchestrator']],
  // Reading the event stream: the inspector through its own consumers.
  ['$JS.API.CONSUMER.CREATE.POLISH_EVENTS', ['orchestrator', 'inspector']],
  // The run service: clients call it.
  ['polish.v1.run.submit', ['client']],
  ['$SRV.PING.polish', ['client']],
  // Another principal's inbox: a forged reply. Only its owner.
  [`${inboxOf('orchestrator')}.forged`, ['orchestrator']],
  [`${inboxOf('client')}.forged`, ['client']],
];

/** Subscriptions that matter, and who may make them. */
export const SUBSCRIBE: [subject: string, allowed: readonly Principal[]][] = [
  ['polish.v1.task.>', []],
  ...ROLES.map((role): [string, readonly Principal[]] => [`polish.v1.task.${role}`, []]),
  ['polish.v1.lane.>', []],
  ['polish.v1.lane.evaluate.openai_gpt-5', []],
  ['$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.POLISH_LANES_EVALUATE.*', ['orchestrator']],
  ['polish.v1.reply.>', ['orchestrator']],
  ['polish.v1.progress.>', ['orchestrator']],
  ['polish.v1.crashed.>', ['orchestrator']],
  ['polish.v1.events.>', ['client']],
  ['polish.v1.run.>', ['orchestrator']],
  ['$KV.polish_runs.>', []],
  ['$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.POLISH_TASKS.*', ['orchestrator']],
  ['_INBOX.>', []],
  ...PRINCIPALS.map((owner): [string, readonly Principal[]] => [`${inboxOf(owner)}.>`, [owner]]),
];

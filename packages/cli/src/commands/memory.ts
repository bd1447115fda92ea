import { Option, type Command } from 'commander';
import {
  decideMemoryProposal,
  humanKeysFrom,
  listMemoryProposals,
  readJsonFile,
  proposeMemory,
  verifyMemoryLog,
  type MemoryAction,
} from '@polish/orchestrator';
import { PolishError, invalidInput } from '@polish/protocol';

const DEFAULT_COORD = '.coord';

/** `polish memory propose`: records a proposal and prints it. */
export function memoryProposeCommand(flags: {
  sourceTask?: string;
  operation?: string;
  target?: string;
  summary?: string;
  evidence?: string[];
  coord?: string;
}): number {
  const { sourceTask, operation, target, summary } = flags;
  if (!sourceTask) throw invalidInput('source-task', 'required: --source-task TASK');
  if (!operation) throw invalidInput('operation', 'required: --operation add|update|remove');
  if (!target) throw invalidInput('target', 'required: --target REF');
  if (!summary) throw invalidInput('summary', 'required: --summary TEXT');
  // The operation is checked by commander's choices and again by the proposal schema.
  const action = {
    operation: operation as MemoryAction['operation'],
    target_ref: target,
    summary,
    evidence_refs: flags.evidence ?? [],
  };
  const proposal = proposeMemory(flags.coord ?? DEFAULT_COORD, { source_task: sourceTask, action });
  process.stdout.write(`${JSON.stringify(proposal, null, 2)}\n`);
  return 0;
}

/** `polish memory list`: the proposals, and whether the log verifies (exit 2 when it does not). */
export function memoryListCommand(flags: { coord?: string; json?: boolean; policy?: string }): number {
  const coord = flags.coord ?? DEFAULT_COORD;
  const keys = flags.policy ? { policy: readJsonFile(flags.policy, 'policy'), secrets: humanKeysFrom() } : undefined;
  const check = verifyMemoryLog(coord, keys);
  const proposals = listMemoryProposals(coord);
  if (flags.json) {
    const log = { ok: check.ok, events: check.events.length, ...(check.problem ? { problem: check.problem } : {}) };
    process.stdout.write(`${JSON.stringify({ proposals, log }, null, 2)}\n`);
  } else {
    for (const { proposal_id, state, action } of proposals) {
      const summary = action.summary.split('\n')[0] ?? '';
      process.stdout.write(
        `${proposal_id}  ${state.padEnd(8)}  ${action.operation.padEnd(6)}  ${action.target_ref}  ${summary.length > 80 ? `${summary.slice(0, 79)}…` : summary}\n`,
      );
    }
    if (proposals.length === 0) process.stdout.write('no memory proposals\n');
  }
  if (!check.ok)
    throw new PolishError('INVALID_INPUT', `the memory log does not verify: ${check.problem}`, { field: 'memory' });
  return 0;
}

/** `polish memory approve|reject <id>`: records a signed human decision. */
export function memoryDecideCommand(
  decision: 'approve' | 'reject',
  id: string,
  flags: { policy?: string; keyId?: string; rationale?: string; coord?: string },
): number {
  const { policy, keyId, rationale } = flags;
  if (!policy) throw invalidInput('policy', 'required: --policy file.json');
  if (!keyId)
    throw invalidInput(
      'key-id',
      'required: --key-id KEY (a key of the policy, its secret in AGENT_COLLAB_HUMAN_KEYS_JSON)',
    );
  if (!rationale) throw invalidInput('rationale', 'required: --rationale TEXT');
  const decided = decideMemoryProposal(flags.coord ?? DEFAULT_COORD, id, {
    decision,
    keyId,
    rationale,
    policy: readJsonFile(policy, 'policy'),
    secrets: humanKeysFrom(),
  });
  process.stdout.write(`${JSON.stringify(decided, null, 2)}\n`);
  return 0;
}

const coordOption = (command: Command) =>
  command.option('--coord <dir>', `the coordination folder (default ${DEFAULT_COORD})`);

/** `polish memory propose|list|approve|reject`: lessons for PAR, applied only with a recorded human approval. */
export function registerMemoryCommands(program: Command): void {
  const memory = program
    .command('memory')
    .description('memory proposals: lessons recorded only as proposals, applied only with a signed human approval');
  coordOption(
    memory
      .command('propose')
      .description('record a proposed lesson (state proposed) and print it')
      .option('--source-task <task>', 'the task the lesson comes from')
      .addOption(new Option('--operation <op>', 'what to do at the target').choices(['add', 'update', 'remove']))
      .option('--target <ref>', 'where the lesson goes, e.g. docs/lessons.md#testing')
      .option('--summary <text>', 'the lesson (at most 2000 characters)')
      .option(
        '--evidence <ref>',
        'an evidence reference (repeat for more)',
        (value: string, previous: string[] = []) => [...previous, value],
      ),
  ).action((flags) => {
    process.exitCode = memoryProposeCommand(flags);
  });
  coordOption(
    memory
      .command('list')
      .description('list proposals and verify the event log; exit 2 when the log does not verify')
      .option('--json', 'print JSON')
      .option('--policy <file>', "also check every decision's signature (secrets from AGENT_COLLAB_HUMAN_KEYS_JSON)"),
  ).action((flags) => {
    process.exitCode = memoryListCommand(flags);
  });
  for (const decision of ['approve', 'reject'] as const) {
    coordOption(
      memory
        .command(decision)
        .description(
          `${decision} a proposal with a signed human decision (key secret from AGENT_COLLAB_HUMAN_KEYS_JSON)`,
        )
        .argument('<id>', 'the proposal id (mp-…)')
        .option('--policy <file>', 'agent-policy-1 JSON file whose key_hashes hold the key')
        .option('--key-id <key>', 'the human key that signs the decision')
        .option('--rationale <text>', 'why'),
    ).action((id: string, flags) => {
      process.exitCode = memoryDecideCommand(decision, id, flags);
    });
  }
}

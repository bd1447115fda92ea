import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AnyPolicyDecision, ParCheckpoint, ParFinalStatus, ParRoleUsage, ParTaskFile } from '@polish/protocol';
import { mergeRoleUsage } from './par-state.js';

/** What `.coord/par_<topic>_final.md` is written from. */
export interface FinalReportInput {
  workspace: string;
  task: ParTaskFile;
  status: ParFinalStatus;
  reason: string;
  decision: AnyPolicyDecision | null;
  checkpoint: ParCheckpoint | null;
  pendingGates: string[];
  /** The models that answered in this run (scripted ones say so). */
  models: string[];
}

const quote = (text: string) =>
  text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');

/** The evidence a ref names: the evidence file's text when it is one, else the ref alone. */
function evidenceText(workspace: string, ref: string): string | undefined {
  if (!ref.startsWith('.coord/evidence/')) return undefined;
  const path = join(workspace, ref);
  return existsSync(path) ? readFileSync(path, 'utf8').trimEnd() : undefined;
}

const unknownOr = (value: number | null, unit = '') => (value === null ? 'unknown' : `${value}${unit}`);

/** Usage per role over every measured cycle, tasks and children dispatched, and the lessons given. */
function usageLines(task: ParTaskFile): string[] {
  const measured = task.cycles.filter((cycle) => cycle.metrics);
  if (measured.length === 0) return ['Not measured (cycles recorded before polish measured them).'];
  const byRole = new Map<string, ParRoleUsage>();
  for (const cycle of measured)
    for (const [role, usage] of Object.entries(cycle.metrics?.by_role ?? {}))
      byRole.set(role, mergeRoleUsage(byRole.get(role), usage));
  const sum = (key: 'tool_calls' | 'children_spawned') =>
    measured.reduce((total, cycle) => total + (cycle.metrics?.[key] ?? 0), 0);
  const lessons = [...new Set(task.cycles.flatMap((cycle) => cycle.lessons ?? []))];
  return [
    `Tasks dispatched: ${sum('tool_calls')}; child tasks (reviewer or command): ${sum('children_spawned')}.`,
    ...[...byRole].map(
      ([role, usage]) =>
        `- ${role}: ${usage.calls} call(s), input ${unknownOr(usage.input_tokens)} (+${unknownOr(usage.cached_input_tokens)} cached), output ${unknownOr(usage.output_tokens)} tokens, cost ${unknownOr(usage.cost_microusd, ' µUSD')}`,
    ),
    `Approved lessons given to the planner: ${lessons.length > 0 ? lessons.join(', ') : 'none'}.`,
  ];
}

/**
 * The final report: final status, the last policy decision, the acceptance evidence (with the
 * critique's output inline), the unsuccessful attempts, unresolved risks, and the human
 * decision required, if any.
 */
export function renderFinalReport(input: FinalReportInput): string {
  const { task, decision } = input;
  const passing = task.cycles.filter((cycle) => cycle.verdict === 'pass' || cycle.verdict === 'needs-human').at(-1);
  const failures = task.cycles.filter((cycle) => cycle.verdict === 'fail' || cycle.verdict === 'error');
  const lines: string[] = [
    `# PAR ${task.topic}: ${input.status.toUpperCase()}`,
    '',
    `Goal: ${task.goal}`,
    '',
    '## Final status',
    '',
    `**${input.status}**: ${input.reason}`,
    '',
    `Cycles: ${task.cycles.length}. Critique source: ${task.critique_source.kind}${'command' in task.critique_source ? ` (\`${task.critique_source.command}\`)` : ''}.`,
    `Models this run: ${input.models.length > 0 ? input.models.join(', ') : 'none called'}.`,
    '',
    '## Last policy decision',
    '',
  ];
  if (decision) {
    lines.push(
      `Decision **${decision.decision}** by policy \`${decision.policy_id}\`${decision.policy_hash ? ` (sha256 ${decision.policy_hash.slice(0, 16)}…)` : ''}.`,
      '',
      decision.reasons.length > 0
        ? decision.reasons.map((reason) => `- \`${reason}\``).join('\n')
        : '- no reasons: nothing stood in the way',
      '',
      '```json',
      JSON.stringify(decision, null, 2),
      '```',
    );
  } else lines.push('No decision was reached.');
  lines.push('', '## What it used', '', ...usageLines(task));
  lines.push('', '## Acceptance evidence', '');
  if (passing) {
    lines.push(
      `Cycle ${passing.cycle} (${passing.plan_summary}) satisfied the criteria the ${task.critique_source.kind} critique judges:`,
      '',
    );
    for (const criterion of task.acceptance_criteria.filter((entry) => !entry.human_gate))
      lines.push(`- ${criterion.id}: ${criterion.text}`);
    lines.push('');
    for (const ref of passing.evidence_refs) {
      const text = evidenceText(input.workspace, ref);
      lines.push(`- \`${ref}\``);
      if (text) lines.push('', quote(text), '');
    }
    const approved = input.checkpoint?.decisions.filter((record) => record.decision === 'approve') ?? [];
    for (const record of approved)
      lines.push(
        `- human gate ${record.gate}: approved by ${record.actor} at ${record.timestamp}: ${record.rationale}`,
      );
  } else lines.push('None: no cycle satisfied the acceptance criteria.');
  lines.push('', '## Unsuccessful attempts', '');
  if (failures.length === 0) lines.push('None.');
  for (const cycle of failures)
    lines.push(`- cycle ${cycle.cycle}: ${cycle.plan_summary} → ${cycle.verdict}`, '', quote(cycle.critique), '');
  lines.push('', '## Unresolved risks', '');
  const risks: string[] = [];
  if (task.critique_source.kind === 'self')
    risks.push('The only critique was self-critique, which is never independent acceptance.');
  if (task.critique_source.kind === 'command' || task.critique_source.kind === 'score') {
    risks.push(
      'The command judges every non-gate criterion together: a criterion the command does not exercise is not verified.',
    );
  }
  if (input.pendingGates.length > 0) risks.push(`Human gates not yet approved: ${input.pendingGates.join(', ')}.`);
  if (input.status === 'checkpoint') risks.push('The run handed back at a checkpoint: resume it to continue.');
  if (input.status === 'error')
    risks.push('An infrastructure error ended the run: the last cycle is not evidence of the artifact either way.');
  lines.push(...(risks.length > 0 ? risks.map((risk) => `- ${risk}`) : ['None known.']));
  lines.push('', '## Human decision required', '');
  if (input.pendingGates.length > 0) {
    for (const gate of input.pendingGates) {
      const criterion = task.acceptance_criteria.find((entry) => entry.id === gate);
      lines.push(
        `- **${gate}**: ${criterion?.text ?? ''}`,
        '',
        `      polish par decide --topic ${task.topic} --gate ${gate} --approve|--decline|--revise --key-id <key> --rationale "…"`,
        `      polish par resume --topic ${task.topic}`,
        '',
      );
    }
  } else if (input.status === 'stop' && /^(limit_|goal_limit:|spawn_not_allowed:)/.test(input.reason)) {
    lines.push(
      'A limit was reached. To go on, a human may raise it with a signed override in the checkpoint (agent-collab-harness `overrides`), or raise a goal limit in the policy, then `polish par resume`.',
    );
  } else lines.push('None.');
  return `${lines.join('\n')}\n`;
}

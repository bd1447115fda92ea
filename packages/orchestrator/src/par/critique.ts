import { sha256 } from '../hash.js';
import type { CritiqueSourceSpec, ParAction, ParCommandResult, ParFiles, ParReview } from '@polish/protocol';
import { canonicalJson } from './canonical-json.js';
import type { CritiqueSource } from './classify-cycle.js';

/** What a critique source answered, before it is judged. */
export type CritiqueAnswer =
  | { kind: 'command' | 'score'; result: ParCommandResult }
  | { kind: 'review'; result: ParReview }
  | { kind: 'self'; result: ParAction['self_assessment'] };

/** A file of evidence the run keeps under `.coord/evidence/`, named by its content. */
export interface EvidenceDocument {
  /** Relative to the workspace, e.g. `.coord/evidence/command-1f2e….txt`. */
  ref: string;
  content: string;
}

/** A critique judged: its verdict, what identifies its failure, its evidence, and what the agent is told. */
export interface CritiqueJudgement {
  source: CritiqueSource;
  verdict: 'pass' | 'fail' | 'error';
  failureSignature: string | null;
  evidence: EvidenceDocument[];
  /** One paragraph for the agent's history and the task file. */
  summary: string;
}

/** The artifact's identity: the SHA-256 of its files' canonical JSON. */
export const artifactDigest = (files: ParFiles) => sha256(canonicalJson(files));

/** How much of a command's output the agent is told (the evidence file keeps the whole tail). */
const SUMMARY_TAIL = 600;

// Named by the normalized content: the same result in another cycle is the same evidence.
const evidence = (kind: string, extension: string, content: string): EvidenceDocument => ({
  ref: `.coord/evidence/${kind}-${sha256(normalizeOutput(content)).slice(0, 16)}.${extension}`,
  content,
});

function commandEvidence(command: string, result: ParCommandResult, extra = ''): string {
  // The duration is left out: the same result must give the same evidence file.
  return `command: ${command}\nexit code: ${result.exit_code ?? 'none (killed)'}\ntimed out: ${result.timed_out}\n${extra}--- output (tail) ---\n${result.output_tail}\n`;
}

/**
 * Output as compared across cycles: durations and clock times masked, so a test runner that
 * prints how long it took still gives the same failure the same signature.
 */
export function normalizeOutput(text: string): string {
  return text
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?/g, '<time>')
    .replace(/\b\d{1,2}:\d{2}:\d{2}\b/g, '<time>')
    .replace(/\b\d+(?:\.\d+)?\s?(?:ms|s|µs|us|ns|sec|secs|seconds|milliseconds)\b/g, '<duration>')
    .replace(/(duration[_ ]?(?:ms)?[:=]?\s*)\d+(?:\.\d+)?/gi, '$1<duration>');
}

/** The last number a score command printed. */
export function lastNumber(text: string): number | undefined {
  const found = text.match(/-?\d+(?:\.\d+)?(?:e[+-]?\d+)?/gi);
  return found ? Number(found.at(-1)) : undefined;
}

/**
 * Judges a critique source's answer against the acceptance criteria the agent can satisfy (human
 * gates are never judged here). A command passes on exit code 0; a score when its last printed
 * number reaches the threshold; a review when every criterion passed; self-critique is recorded
 * but never acceptance (see `classifyCycle`).
 */
export function judgeCritique(source: CritiqueSourceSpec, answer: CritiqueAnswer): CritiqueJudgement {
  if (
    (answer.kind === 'command' || answer.kind === 'score') &&
    (source.kind === 'command' || source.kind === 'score')
  ) {
    const { result } = answer;
    const status = result.timed_out
      ? `timed out after ${source.timeout_seconds} s`
      : `exit ${result.exit_code ?? 'none'}`;
    const tail = result.output_tail.slice(-SUMMARY_TAIL).trim();
    // 126/127: the shell could not run the command (not executable, not found): the critique is missing, not failing.
    if ((result.exit_code === null && !result.timed_out) || result.exit_code === 126 || result.exit_code === 127) {
      return {
        source: source.kind,
        verdict: 'error',
        failureSignature: null,
        evidence: [],
        summary: `the command could not run (${status}): ${tail}`,
      };
    }
    if (source.kind === 'command') {
      const passed = result.exit_code === 0 && !result.timed_out;
      const content = commandEvidence(source.command, result);
      return {
        source: 'command',
        verdict: passed ? 'pass' : 'fail',
        failureSignature: passed ? null : sha256(`${status}\n${normalizeOutput(result.output_tail)}`),
        evidence: [evidence('command', 'txt', content)],
        summary: `\`${source.command}\`: ${status}${tail ? `\n${tail}` : ''}`,
      };
    }
    const score = lastNumber(result.output_tail);
    if (score === undefined || result.timed_out) {
      return {
        source: 'score',
        verdict: 'error',
        failureSignature: null,
        evidence: [],
        summary: `the score command printed no score (${status}): ${tail}`,
      };
    }
    const passed = score >= source.threshold;
    const content = commandEvidence(source.command, result, `score: ${score} (threshold ${source.threshold})\n`);
    return {
      source: 'score',
      verdict: passed ? 'pass' : 'fail',
      failureSignature: passed ? null : sha256(`score ${score}`),
      evidence: [evidence('score', 'txt', content)],
      summary: `score ${score} ${passed ? '≥' : '<'} threshold ${source.threshold}`,
    };
  }
  if (answer.kind === 'review') {
    const failing = answer.result.results.filter((result) => !result.passed);
    const content = `${JSON.stringify(answer.result, null, 2)}\n`;
    return {
      source: 'review',
      verdict: failing.length === 0 ? 'pass' : 'fail',
      failureSignature: failing.length === 0 ? null : sha256(canonicalJson(failing)),
      evidence: [evidence('review', 'json', content)],
      summary: answer.result.results
        .map((result) => `${result.id} ${result.passed ? 'passed' : 'failed'}: ${result.evidence}`)
        .join('\n'),
    };
  }
  if (answer.kind === 'self') {
    return {
      source: 'self',
      verdict: answer.result.passed ? 'pass' : 'fail',
      failureSignature: answer.result.passed ? null : sha256(answer.result.notes),
      // Self-critique is no evidence of progress: only the artifact can be new.
      evidence: [],
      summary: `self-assessment (not acceptance): ${answer.result.passed ? 'passed' : 'not yet'}: ${answer.result.notes}`,
    };
  }
  return {
    source: source.kind,
    verdict: 'error',
    failureSignature: null,
    evidence: [],
    summary: `the ${answer.kind} critique does not match the ${source.kind} source`,
  };
}

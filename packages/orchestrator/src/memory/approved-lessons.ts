import type { ParLesson, ParPolicy } from '@polish/protocol';
import { listMemoryProposals, verifyMemoryLog } from './memory-proposals.js';

/** The lessons a PAR run may give its planner, or why it gives none. */
export interface ApprovedLessons {
  lessons: ParLesson[];
  /** Set when the memory log could not be trusted, so no lesson is used. */
  problem?: string;
}

/** At most this many lessons go to the planner: the most recent ones. */
const MAX_LESSONS = 32;

/**
 * The lessons of a topic that a human approved: memory proposals whose `source_task` is the
 * topic, in state `approved`, from a log that verifies whole (every line, the chain, its
 * anchored head, and every decision's signature against the policy's keys). A log that does not
 * verify gives no lesson at all: an unverified approval is no approval.
 */
export function approvedLessons(
  coordDir: string,
  topic: string,
  policy: ParPolicy,
  secrets: Record<string, string>,
): ApprovedLessons {
  const check = verifyMemoryLog(coordDir, { policy, secrets });
  if (!check.ok) return { lessons: [], problem: check.problem ?? 'the memory log does not verify' };
  const lessons = listMemoryProposals(coordDir)
    .filter((proposal) => proposal.state === 'approved' && proposal.source_task === topic)
    .slice(-MAX_LESSONS)
    .map((proposal) => ({
      id: proposal.proposal_id,
      target_ref: proposal.action.target_ref,
      lesson: proposal.action.summary,
    }));
  return { lessons };
}

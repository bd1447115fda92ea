// What Wave 3 costs in edit form against full-text form, measured in one run (`pnpm bench`).
// Both runs revise the same 20 KB artifact with two gaps through the real handlers and the
// orchestrator; the scripted model's usage counts characters / 4 of the real prompts and answers.
import { createScriptedProvider, handleTask } from '@polish/agents';
import { createInProcessDispatcher, runPolish } from '@polish/orchestrator';
import { DEFAULT_PRICES } from '@polish/cli';

const PRICED_AS = 'anthropic:claude-sonnet-4-5';
const LIMIT = 'The limit is 100 requests per minute per key.';
const STATUS = 'A request over the limit gets status 429 Too Many Requests.';
const criteria = [
  { id: 'C1', text: 'States the limit.' },
  { id: 'C2', text: 'Names the status code.' },
];

/** About 20 KB: 42 sections of filler, neither sentence in it. */
function artifactOf() {
  const words = 'meter bucket token window client header budget burst replica shard queue drain'.split(' ');
  const sections = Array.from({ length: 42 }, (_, section) => {
    const text = Array.from({ length: 72 }, (_, word) => words[(section + word * 5) % words.length]).join(' ');
    return `## Section ${section + 1}\n${text}.\n`;
  });
  return `# Traffic metering\n\n${sections.join('\n')}`;
}

/** The two edits closing C1 (in section 7) and C2 (in section 23); the same revision as a whole text. */
function edits(text) {
  const list = [];
  if (!text.includes(LIMIT))
    list.push({ find: '## Section 7\n', replace: `## Section 7\n${LIMIT}\n`, criterion_id: 'C1' });
  if (!text.includes(STATUS))
    list.push({ find: '## Section 23\n', replace: `## Section 23\n${STATUS}\n`, criterion_id: 'C2' });
  return list;
}
const inFull = (text) => edits(text).reduce((current, edit) => current.replace(edit.find, edit.replace), text);

/** The scripted model: quotes each sentence once it is there; revises in the form the prompt asks. */
const model = (mode) => ({
  ...createScriptedProvider((request) => {
    const text = String(request.payload.artifact);
    if (request.role === 'evaluate') {
      const score = (id, sentence) =>
        text.includes(sentence)
          ? { criterion_id: id, pass: true, evidence: sentence }
          : { criterion_id: id, pass: false, gap: `add: ${sentence}` };
      return { scores: [score('C1', LIMIT), score('C2', STATUS)] };
    }
    return mode === 'edits' ? { edits: edits(text) } : { artifact: inFull(text) };
  }),
  answers: { revise: mode },
});

/**
 * Runs the same polish run by edits and in full and returns the Wave 3 output tokens of each,
 * their ratio, each whole run's estimated cost at one price table, and a Markdown section.
 */
export async function measureReviseCost() {
  const artifact = artifactOf();
  const prices = { 'scripted:*': DEFAULT_PRICES[PRICED_AS] };
  const runs = {};
  for (const mode of ['edits', 'full']) {
    const scripted = model(mode);
    const result = await runPolish(
      { artifact, goal: 'Document the traffic limits.', criteria, revise_mode: mode },
      { dispatcher: createInProcessDispatcher((task) => handleTask(task, scripted)), prices },
    );
    if (result.status !== 'CONVERGED') throw new Error(`revise-cost bench: ${mode} run ended ${result.status}`);
    runs[mode] = result;
  }
  const output = (mode) => runs[mode].usage_by_wave.revise.output_tokens;
  const cost = (mode) => runs[mode].cost.total;
  const same = runs.edits.artifact === runs.full.artifact;
  const ratio = output('full') / output('edits');
  const rows = [
    ['Wave 3 output tokens, edits', output('edits'), ''],
    ['Wave 3 output tokens, full text', output('full'), `${ratio.toFixed(1)}× edits`],
    ['whole run, edits: estimated cost', `$${cost('edits').toFixed(4)}`, `${runs.edits.usage.model_calls} model calls`],
    [
      'whole run, full text: estimated cost',
      `$${cost('full').toFixed(4)}`,
      `${(cost('full') / cost('edits')).toFixed(2)}× edits`,
    ],
  ];
  const markdown = [
    '## Revision cost: edits vs full text',
    '',
    `One run each of a ${(artifact.length / 1024).toFixed(1)} KB artifact with 2 gaps, revised once and converging ` +
      `(the same final artifact in both: ${same ? 'yes' : '**no**'}). Usage is the scripted model's, which counts ` +
      `characters / 4 of the real prompts and answers; cost at the ${PRICED_AS} prices of the default table.`,
    '',
    '| measure | value | note |',
    '| --- | --- | --- |',
    ...rows.map((row) => `| ${row.join(' | ')} |`),
    '',
    `Target: at least 10× fewer Wave 3 output tokens by edits — ${ratio >= 10 && same ? 'met' : '**not met**'} (${ratio.toFixed(1)}×).`,
    '',
  ].join('\n');
  return {
    outputEdits: output('edits'),
    outputFull: output('full'),
    ratio,
    costEdits: cost('edits'),
    costFull: cost('full'),
    same,
    markdown,
  };
}

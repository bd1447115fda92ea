// What Wave 3 costs in edit form against full-text form, measured in one run (`pnpm bench`).
// Both runs revise the same 20 KB artifact with two gaps through the real Anthropic SDK, the real
// handlers and the orchestrator, against a local fake Messages API server (the one the tests use)
// that reports usage as characters / 4 of what it received and answered. The figures are that
// server's log, not the orchestrator's own count (which the bench checks agrees with it).
import { handleTask, prompts } from '@polish/agents';
import { createAnthropicProvider } from '@polish/agents/anthropic';
import { createInProcessDispatcher, runPolish } from '@polish/orchestrator';
import { DEFAULT_PRICES } from '@polish/cli';
// Node 24 loads these TypeScript files as they are (type stripping): one fake server for tests and bench.
import { charactersOverFour, startFakeModelServer } from '../test/support/fake-model-server.ts';
import { anthropicDialect } from '../test/support/fake-anthropic.ts';
import { anthropicSystem, anthropicUser } from '../test/support/sdk-requests.ts';

const MODEL = 'claude-sonnet-5-5';
const PRICED_AS = `anthropic:${MODEL}`;
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

/** The role a request is for, read from its system prompt as the tests do. */
function roleOf(system) {
  for (const [role, prompt] of [
    ['evaluate', prompts.EVALUATE_SYSTEM],
    ['revise', prompts.REVISE_SYSTEM],
  ])
    if (system.includes(prompt.slice(0, 60))) return role;
  throw new Error(`revise-cost bench: unknown system prompt ${system.slice(0, 60)}`);
}

/** The fake server's "model": quotes each sentence once it is there; revises in the form the prompt asks. */
function answer(request) {
  const system = anthropicSystem(request);
  const text = /<artifact>\n([\s\S]*)\n<\/artifact>/.exec(anthropicUser(request))?.[1] ?? '';
  if (roleOf(system) === 'evaluate') {
    const score = (id, sentence) =>
      text.includes(sentence)
        ? { criterion_id: id, pass: true, evidence: sentence }
        : { criterion_id: id, pass: false, gap: `add: ${sentence}` };
    return { answer: { scores: [score('C1', LIMIT), score('C2', STATUS)] } };
  }
  // The two revise prompts open alike; a line near the end tells the edit form apart (as the tests read it).
  const byEdits = system.includes(prompts.REVISE_EDITS_SYSTEM.split('\n').at(-3));
  return { answer: byEdits ? { edits: edits(text) } : { artifact: inFull(text) } };
}

/**
 * Runs the same polish run by edits and in full and returns the Wave 3 output tokens of each,
 * their ratio, each whole run's estimated cost at one price table, and a Markdown section.
 */
export async function measureReviseCost() {
  const artifact = artifactOf();
  const prices = { [PRICED_AS]: DEFAULT_PRICES[PRICED_AS] };
  const runs = {};
  const logs = {};
  for (const mode of ['edits', 'full']) {
    const server = await startFakeModelServer(anthropicDialect, answer, charactersOverFour);
    try {
      const model = {
        ...createAnthropicProvider({ model: MODEL, apiKey: 'sk-ant-bench', baseURL: server.url, maxTokens: 16384 }),
        answers: { revise: mode },
      };
      const result = await runPolish(
        { artifact, goal: 'Document the traffic limits.', criteria, revise_mode: mode },
        { dispatcher: createInProcessDispatcher((task) => handleTask(task, model)), prices },
      );
      if (result.status !== 'CONVERGED')
        throw new Error(
          `revise-cost bench: ${mode} run ended ${result.status}: ${JSON.stringify(result.error ?? result.failure ?? result.reason)}`,
        );
      runs[mode] = result;
      logs[mode] = server.requests;
    } finally {
      await server.stop();
    }
  }
  // Wave 3's output tokens as the fake server reported them, summed over its revise requests.
  const output = (mode) =>
    logs[mode]
      .filter((request) => roleOf(anthropicSystem(request)) === 'revise')
      .reduce((sum, request) => sum + (request.usage?.output_tokens ?? 0), 0);
  for (const mode of ['edits', 'full'])
    if (output(mode) !== runs[mode].usage_by_wave.revise.output_tokens)
      throw new Error(`revise-cost bench: the ${mode} run counted other Wave 3 usage than the server reported`);
  const cost = (mode) => runs[mode].cost.total;
  const same = runs.edits.artifact === runs.full.artifact;
  const ratio = output('full') / output('edits');
  const rows = [
    ['Wave 3 output tokens, edits', output('edits'), ''],
    ['Wave 3 output tokens, full text', output('full'), `${ratio.toFixed(1)}× edits`],
    ['whole run, edits: estimated cost', `$${cost('edits').toFixed(4)}`, `${logs.edits.length} requests to the server`],
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
      `(the same final artifact in both: ${same ? 'yes' : '**no**'}), through the real Anthropic SDK against a ` +
      `local fake Messages API (test/support/fake-model-server.ts). Tokens are the usage that server reported ` +
      `(characters / 4 of each request and answer; the orchestrator's own count agrees); cost at the ` +
      `${PRICED_AS} prices of the default table.`,
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
